package main

import (
	"context"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// COMMAND's own processes are part of it: a shell killed by the lock
// command's SIGTERM leaves the program it was waiting for running, and a
// script that puts work in the background exits before the work does.
// Either would then run without the lock. So on Linux `homelock lock`
// becomes a child subreaper: a process COMMAND started whose parent exits
// is reparented to the lock command, not to init, and stays in the tree
// below it. The lock command signals that whole tree when the lock is lost
// and holds the lock until the tree is empty.

// commandTree is COMMAND and the processes it started (on Linux; COMMAND
// alone elsewhere).
type commandTree struct {
	cmd *os.Process
	// gone is set once COMMAND has exited and been reaped: its PID may
	// then be another process's.
	gone atomic.Bool
	// killing has waitEmpty SIGKILL every process it finds, once the
	// lock command has killed the tree: a process forked after a kill's
	// listing escapes that kill, not the next.
	killing atomic.Bool
}

func (t *commandTree) exited() { t.gone.Store(true) }

// left is the processes below the lock command, COMMAND's included
// until it has exited.
func (t *commandTree) left() []int {
	keep := 0
	if !t.gone.Load() {
		keep = t.cmd.Pid
	}
	return descendants(keep)
}

// signal sends s to COMMAND while it runs, and to every process of the
// tree if all is set or COMMAND has exited.
func (t *commandTree) signal(s os.Signal, all bool) {
	running := !t.gone.Load()
	if running {
		_ = t.cmd.Signal(s)
	}
	if !all && running {
		return
	}
	n, _ := s.(syscall.Signal)
	for _, pid := range t.left() {
		if running && pid == t.cmd.Pid {
			continue
		}
		_ = syscall.Kill(pid, n)
	}
}

// killAll SIGKILLs the whole tree, now and at every later listing.
func (t *commandTree) killAll() {
	t.killing.Store(true)
	t.signal(syscall.SIGKILL, true)
}

// reapOrphans reaps the orphans the lock command adopted at each SIGCHLD
// until ctx ends: COMMAND may run for days, and each process of its whose
// parent exited first would otherwise stay a zombie until COMMAND exits.
func (t *commandTree) reapOrphans(ctx context.Context) {
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	go func() {
		defer signal.Stop(chld)
		for {
			select {
			case <-ctx.Done():
				return
			case <-chld:
			}
			t.left()
		}
	}()
}

// waitEmpty returns a channel closed once no process is left below the
// lock command, which it lists every treePoll (reaping the orphans it
// adopted); ctx ends the wait.
func (t *commandTree) waitEmpty(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(treePoll)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			left := t.left()
			if len(left) == 0 {
				close(done)
				return
			}
			if t.killing.Load() {
				for _, pid := range left {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
	}()
	return done
}

// pids says which processes: "PID 12" or "PIDs 12, 14".
func pids(p []int) string {
	s := make([]string, len(p))
	for i, pid := range p {
		s[i] = strconv.Itoa(pid)
	}
	if len(p) == 1 {
		return "PID " + s[0]
	}
	return "PIDs " + strings.Join(s, ", ")
}

// treePoll is how often the lock command lists the processes COMMAND left
// running: how late after the last of them it releases the lock.
const treePoll = 50 * time.Millisecond
