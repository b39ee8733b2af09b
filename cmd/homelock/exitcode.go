package main

import (
	"errors"
	"flag"
	"os/exec"
	"syscall"
)

// The exit codes of homelock's own outcomes. Those of `homelock lock` sit
// just below the shell's 126 and 127 (as timeout(1)'s 124 does), where few
// commands put theirs, so that a script can tell them from COMMAND's own
// status, which `homelock lock` passes through otherwise.
const (
	exitFailed   = 1 // anything else homelock itself failed at
	exitUsage    = 2 // bad flags or arguments, or a --lease/--wait the node refused
	exitLost     = 120
	exitNoNode   = 121
	exitNoLocks  = 122
	exitTimedOut = 123
	exitCannot   = 126 // COMMAND was found but could not be started
	exitNotFound = 127 // COMMAND was not found
)

// exitCodesHelp is the table the help of `homelock` and `homelock lock`
// print; README.md and doc.go carry the same.
const exitCodesHelp = `Exit status of homelock lock:
  COMMAND's own   the lock was held from before COMMAND started until after it exited
                  (128+N if COMMAND was killed by signal N)
  2               usage error: bad flag or argument, or --lease/--wait refused by the node
  120             lock lost while COMMAND ran (lease ran out or revoked, or the node shut
                  down, which keeps the lock until COMMAND exits): COMMAND was stopped
  121             node unreachable: refused, or no answer within --wait
  122             unavailable: no epoch liveness, not a member, mixed protocol versions,
                  the key's home silent or in its gate when --wait ran out,
                  too many delegations, node shutting down
  123             not acquired in time: still queued behind a holder when --wait ran out
                  (at once with --try)
  126, 127        COMMAND could not be started, or was not found
  128+N           homelock lock got signal N before COMMAND started (nothing ran)
  1               any other failure of homelock lock itself
`

// parseFlags parses args into fs: with --help (-h) the usage is printed and
// the command exits 0, a bad flag exits exitUsage.
func parseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	err := fs.Parse(args)
	switch {
	case err == nil:
		return 0, true
	case errors.Is(err, flag.ErrHelp):
		return 0, false
	}
	return exitUsage, false
}

// exitCode is the command's exit status as a shell reports it: its code, or
// 128 + the signal that killed it.
func exitCode(err error) int {
	if err == nil || errors.Is(err, exec.ErrWaitDelay) {
		// ErrWaitDelay: COMMAND exited 0 and something it left running
		// kept its output pipe open.
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return exitFailed
}

// startCode is the status for a command that could not be started, as a
// shell has it.
func startCode(err error) int {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, syscall.ENOENT) {
		return exitNotFound
	}
	return exitCannot
}
