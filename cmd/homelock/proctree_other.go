//go:build !linux

package main

// Without a subreaper or /proc, the lock command knows only COMMAND: the
// processes COMMAND starts are not signalled with it, and one still
// running when COMMAND exits runs on without the lock (docs/locks.md).

func adoptOrphans() (undo func()) { return func() {} }

func descendants(int) []int { return nil }
