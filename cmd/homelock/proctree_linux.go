package main

import (
	"bytes"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// adoptOrphans makes this process the subreaper of its descendants'
// orphans, and returns what undoes it (tests run the lock command in the
// test process).
func adoptOrphans() (undo func()) {
	if unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != nil {
		return func() {}
	}
	return func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) }
}

// descendants returns the live processes below this one. A zombie is not
// live: one whose parent is this process and that is not keep (COMMAND,
// which exec.Cmd.Wait reaps) is an orphan the lock command adopted, and is
// reaped here.
func descendants(keep int) []int {
	self := os.Getpid()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		ppid, zombie, ok := readStat(pid)
		if !ok {
			continue // gone since the listing
		}
		if zombie {
			if ppid == self && pid != keep {
				var ws unix.WaitStatus
				_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
			}
			continue
		}
		children[ppid] = append(children[ppid], pid)
	}
	var out []int
	for queue := children[self]; len(queue) > 0; {
		pid := queue[0]
		queue = append(queue[1:], children[pid]...)
		out = append(out, pid)
	}
	return out
}

// readStat reads a process's parent and whether it is a zombie from
// /proc/PID/stat: "PID (COMM) STATE PPID ...", where COMM may hold spaces
// and parentheses, so the fields are counted from the last ')'.
func readStat(pid int) (ppid int, zombie, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false, false
	}
	return parseStat(b)
}

func parseStat(b []byte) (ppid int, zombie, ok bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 || len(f[0]) != 1 {
		return 0, false, false
	}
	ppid, err := strconv.Atoi(string(f[1]))
	if err != nil {
		return 0, false, false
	}
	return ppid, f[0][0] == 'Z' || f[0][0] == 'X', true
}
