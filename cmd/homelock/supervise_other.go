//go:build !linux

package main

import "os"

// runLockProcess runs the lock command itself: without PR_SET_PDEATHSIG and
// a subreaper a supervisor could not learn of its child's death nor reach
// what COMMAND started (docs/locks.md).
func runLockProcess(args []string) int { return runLock(args, os.Stdout, os.Stderr) }
