package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A SIGKILL to the lock command ends its lock at once (its stream to the
// node closes), and nothing of it runs afterwards to stop what COMMAND
// started: PR_SET_PDEATHSIG reaches COMMAND alone, and a process COMMAND
// started would run on without the lock. So on Linux the process a user
// starts as `homelock lock` is only a supervisor: it runs the lock command
// as its child, is the subreaper above it, and stays its parent.
//
//   - The supervisor killed (the PID the user knows): the lock command,
//     which still holds the lock, gets parentGone from the kernel, SIGKILLs
//     every process COMMAND started, and releases the lock once they have
//     exited.
//   - The lock command killed (the OOM killer picks the larger process):
//     its lock is gone, and the processes below it come to the supervisor,
//     which SIGKILLs them all.
//
// What neither can reach: a process that left the tree through another
// parent, and all of it when both are killed at once (a SIGKILL to the
// process group reaches COMMAND's processes in it too).

// supervisorEnv names the supervisor's PID in the lock command's
// environment. The lock command removes it before COMMAND starts, so a
// `homelock lock` that COMMAND runs supervises itself again.
const supervisorEnv = "_HOMELOCK_LOCK_SUPERVISOR"

// runLockProcess is `homelock lock` as a process: the supervisor, or,
// started by one, the lock command itself.
func runLockProcess(args []string) int {
	if v, ok := os.LookupEnv(supervisorEnv); ok {
		_ = os.Unsetenv(supervisorEnv)
		sup, err := strconv.Atoi(v)
		if err != nil || sup <= 1 {
			fmt.Fprintf(os.Stderr, "homelock lock: bad %s=%q\n", supervisorEnv, v)
			return exitFailed
		}
		return lockMain(args, os.Stdout, os.Stderr, sup, supervisorInterrupts())
	}
	return superviseLock(args)
}

// interruptsFD is the lock command's descriptor for the pipe on which its
// supervisor writes a byte for each SIGINT it gets while the two share a
// terminal's foreground group (the first of exec.Cmd.ExtraFiles).
const interruptsFD = 3

// supervisorInterrupts reads the supervisor's interrupts pipe: a value for
// each byte, closed at the pipe's end (the supervisor is gone). Nil if
// there is no such pipe.
func supervisorInterrupts() <-chan struct{} {
	var st unix.Stat_t
	if unix.Fstat(interruptsFD, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return nil
	}
	// Not for COMMAND; and non-blocking, so that the runtime's poller
	// reads it rather than a thread parked in read(2).
	unix.CloseOnExec(interruptsFD)
	if unix.SetNonblock(interruptsFD, true) != nil {
		return nil
	}
	pipe := os.NewFile(interruptsFD, "supervisor interrupts")
	out := make(chan struct{}, 4)
	go func() {
		// Ends with the process, or when the supervisor dies (EOF).
		defer close(out)
		defer pipe.Close()
		buf := make([]byte, 16)
		for {
			n, err := pipe.Read(buf)
			for range n {
				out <- struct{}{}
			}
			if err != nil {
				return
			}
		}
	}()
	return out
}

// superviseLock runs the lock command as a child and returns its exit
// status; signals for it are passed on (those a terminal sends its whole
// foreground group reach it directly; a SIGINT there is told to it on the
// interrupts pipe, so that it can tell a Ctrl-C from a kill -INT). Without
// its own executable or the subreaper it runs the lock command itself,
// unsupervised.
func superviseLock(args []string) int {
	self, err := os.Executable()
	if err != nil || unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != nil {
		return runLock(args, os.Stdout, os.Stderr)
	}
	// The lock command parses them again, and says what is wrong.
	a, _ := parseLockArgs(args, io.Discard)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	cmd := exec.Command(self, append([]string{"lock"}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// A SIGINT while both share the terminal's foreground group is told to
	// the lock command, which passes it on to COMMAND unless it got one
	// too (a Ctrl-C, which COMMAND got as well): see relaySignals.
	interruptsR, interrupts, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(os.Stderr, "homelock lock: starting the lock command: %v\n", err)
		return exitFailed
	}
	defer interrupts.Close()
	cmd.ExtraFiles = []*os.File{interruptsR}
	cmd.Env = append(os.Environ(), supervisorEnv+"="+strconv.Itoa(os.Getpid()))
	// The kernel tells the lock command when this process dies, even of a
	// SIGKILL (the signal follows the thread that started it, and Go's
	// runtime ends none while nothing locks one).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: parentGone}
	err = cmd.Start()
	interruptsR.Close()
	if err != nil {
		fmt.Fprintf(os.Stderr, "homelock lock: starting the lock command: %v\n", err)
		return exitFailed
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for {
		select {
		case s := <-sigs:
			switch {
			case s == syscall.SIGINT && terminalForeground():
				_, _ = interrupts.Write([]byte{1}) // the lock command tells whose it was
			case s == syscall.SIGQUIT && terminalForeground():
				// The terminal's (a kill -QUIT of this process alone is
				// not told apart): the lock command got it too.
			default:
				_ = cmd.Process.Signal(s)
			}
		case err := <-exited:
			return supervisedExit(cmd, err, a.releaseAtExit)
		}
	}
}

// supervisedExit is the supervisor's exit status for the lock command's
// end (err, from Wait): its own, or exitFailed if a signal killed it.
// The lock command returns only once the processes below it have exited,
// but for those --release-at-exit leaves running; any other process left
// below the supervisor outlived the lock command's lock (it was killed, or
// died of a panic or a SIGQUIT) and is killed first.
func supervisedExit(cmd *exec.Cmd, err error, releaseAtExit bool) int {
	pid := cmd.Process.Pid
	code, died := 0, ""
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code, died = exitFailed, fmt.Sprintf("died of signal %d (%v), which ended its lock", int(ws.Signal()), ws.Signal())
		}
	case err != nil:
		fmt.Fprintf(os.Stderr, "homelock lock: the lock command (PID %d): %v\n", pid, err)
		code = exitFailed
	}
	if releaseAtExit && died == "" {
		return code
	}
	left := killLeftovers(cmd)
	switch {
	case died != "" && len(left) == 0:
		fmt.Fprintf(os.Stderr, "homelock lock: the lock command (PID %d) %s; nothing was left running\n", pid, died)
	case died != "":
		fmt.Fprintf(os.Stderr, "homelock lock: the lock command (PID %d) %s; killed what COMMAND left running (%s)\n", pid, died, pids(left))
	case len(left) > 0:
		fmt.Fprintf(os.Stderr, "homelock lock: the lock command (PID %d) exited (status %d) with processes left below it; killed them (%s)\n", pid, code, pids(left))
	}
	return code
}

// leftoverKillFor bounds how long the supervisor SIGKILLs and reaps the
// processes left below it: a SIGKILL takes effect at once, so only a
// process stuck in the kernel (an uninterruptible wait) outlasts it.
const leftoverKillFor = 5 * time.Second

// killLeftovers SIGKILLs every process below this one, the exited lock
// command's tree, as the lock command kills COMMAND's, until none is left
// or leftoverKillFor has passed, and returns those it found first.
func killLeftovers(lockCmd *exec.Cmd) []int {
	tree := &commandTree{cmd: lockCmd.Process}
	tree.exited()
	left := tree.left()
	if len(left) == 0 {
		return nil
	}
	tree.killAll()
	ctx, cancel := context.WithTimeout(context.Background(), leftoverKillFor)
	defer cancel()
	select {
	case <-tree.waitEmpty(ctx):
	case <-ctx.Done():
	}
	return left
}
