package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// alive reports whether the process whose PID the file holds still runs.
func alive(t *testing.T, pidFile string) bool {
	t.Helper()
	b, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	if _, zombie, ok := readStat(pid); !ok || zombie {
		return false
	}
	err = syscall.Kill(pid, 0)
	if errors.Is(err, syscall.ESRCH) {
		return false
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	return true
}

// A shell killed by SIGTERM leaves the program it waits for running; a lost
// lock must stop that program too, not only COMMAND.
func TestLockLostStopsWhatCommandStarted(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script string // $1 is the file that gets the inner process's PID
		code   int
		said   string
	}{
		// sh dies of the SIGTERM, its sleep gets one too.
		{"a shell's child", `sleep 30 & echo $! > "$1"; wait`, exitLost, "signal: terminated"},
		// The child ignores SIGTERM: SIGKILL after --kill-after.
		{"a child that ignores SIGTERM", `(trap '' TERM; sleep 30) & echo $! > "$1"; wait`, exitLost, "after the lock was lost"},
		// COMMAND exited at once; the lock is lost while what it left runs.
		{"what COMMAND left running", `sleep 30 >/dev/null 2>&1 & echo $! > "$1"; exit 0`, exitLost, "holding the lock until"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "pid")
			// Late enough for COMMAND to have started (and, in the last case, exited) on a loaded machine.
			addr := serveFake(t, &fakeNode{loseAfter: time.Second})
			var out, errOut bytes.Buffer
			start := time.Now()
			code := run([]string{"lock", "k", "--node", addr, "--kill-after", "300ms", "--", "sh", "-c", tc.script, "sh", pidFile}, &out, &errOut)
			require.Equal(t, tc.code, code, errOut.String())
			require.Less(t, time.Since(start), 10*time.Second)
			require.Contains(t, errOut.String(), tc.said)
			require.False(t, alive(t, pidFile), "the process COMMAND started runs on after the lock was lost: %s", errOut.String())
		})
	}
}

// A process COMMAND leaves running keeps the lock until it exits, as a
// child that inherits flock(1)'s descriptor does, unless --release-at-exit.
func TestLockHeldUntilWhatCommandLeftExits(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		// heldToEnd: the lock is released only after the background job
		// finished; otherwise it is released while the job runs on.
		heldToEnd bool
		said      string
	}{
		{"by default", nil, true, "holding the lock until what it left running exits (PID"},
		// A daemon COMMAND starts runs on without the lock, as with
		// flock -o, instead of holding it for good.
		{"release at exit", []string{"--release-at-exit"}, false, "runs on without it (--release-at-exit)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			done, pidFile := filepath.Join(dir, "done"), filepath.Join(dir, "pid")
			doneAtRelease := make(chan bool, 1)
			addr := serveFake(t, &fakeNode{atRelease: func() {
				_, err := os.Stat(done)
				doneAtRelease <- err == nil
			}})
			var out, errOut bytes.Buffer
			// The background job's output goes elsewhere: a test's buffer is a
			// pipe, which Wait stops copying WaitDelay after COMMAND exits.
			script := `(sleep 2; touch "$1") >/dev/null 2>&1 & echo $! > "$2"; exit 4`
			args := append(append([]string{"lock", "k", "--node", addr}, tc.args...), "--", "sh", "-c", script, "sh", done, pidFile)
			code := run(args, &out, &errOut)
			require.Equal(t, 4, code, "COMMAND's own status: %s", errOut.String())
			select {
			case finished := <-doneAtRelease:
				require.Equal(t, tc.heldToEnd, finished, "job finished at the release: %s", errOut.String())
			case <-time.After(5 * time.Second):
				t.Fatal("the lock was never released")
			}
			require.Contains(t, errOut.String(), tc.said)
			require.Equal(t, !tc.heldToEnd, alive(t, pidFile), "job running after the lock command returned")
		})
	}
}

// After COMMAND has exited, a forwarded signal goes to what it left
// running, and the lock is held until that exits.
func TestLockForwardsToWhatCommandLeft(t *testing.T) {
	absorb(t, syscall.SIGTERM)
	dir := t.TempDir()
	started, got := filepath.Join(dir, "started"), filepath.Join(dir, "got")
	addr := serveFake(t, &fakeNode{validFor: time.Minute})
	// Bounded (10 s) even if the signal never comes, as from a lock command
	// that does not know what COMMAND left.
	script := fmt.Sprintf(`(trap 'touch %q; exit 0' TERM; touch %q; i=0; while [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done) >/dev/null 2>&1 & exit 0`, got, started)
	var out, errOut lockedBuffer
	code := make(chan int, 1)
	go func() { code <- run([]string{"lock", "k", "--node", addr, "--", "sh", "-c", script}, &out, &errOut) }()
	waitFile(t, started, 10*time.Second)
	// COMMAND exits at once; the lock command must have seen it before the
	// signal for the signal to go to what it left.
	for end := time.Now().Add(10 * time.Second); !strings.Contains(errOut.String(), "holding the lock"); time.Sleep(10 * time.Millisecond) {
		require.True(t, time.Now().Before(end), "COMMAND's exit not reported: %s", errOut.String())
	}
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
	select {
	case c := <-code:
		require.Equal(t, 0, c, errOut.String())
	case <-time.After(15 * time.Second):
		t.Fatal("the lock command did not end")
	}
	_, err := os.Stat(got)
	require.NoError(t, err, "the process COMMAND left never got SIGTERM: %s", errOut.String())
	require.Contains(t, errOut.String(), "passing terminated to the processes COMMAND left running")
}

// Orphans COMMAND makes while it runs are reaped as they exit, not when
// COMMAND does: a long COMMAND would otherwise fill the lock command with
// zombies.
func TestLockReapsOrphansWhileCommandRuns(t *testing.T) {
	dir := t.TempDir()
	orphaned, checked := filepath.Join(dir, "orphaned"), filepath.Join(dir, "checked")
	addr := serveFake(t, &fakeNode{validFor: time.Minute})
	// Each (true &) leaves an orphan that exits at once.
	script := fmt.Sprintf(`for i in 1 2 3 4 5 6 7 8; do (true &); done; touch %q; i=0; while [ ! -e %q ] && [ $i -lt 500 ]; do sleep 0.02; i=$((i+1)); done`, orphaned, checked)
	var out, errOut lockedBuffer
	code := make(chan int, 1)
	go func() { code <- run([]string{"lock", "k", "--node", addr, "--", "sh", "-c", script}, &out, &errOut) }()
	waitFile(t, orphaned, 10*time.Second)
	var zombies []int
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		zombies = zombiesOf(t, os.Getpid())
		if len(zombies) == 0 || time.Now().After(end) {
			break
		}
	}
	require.NoError(t, os.WriteFile(checked, nil, 0o644))
	require.Equal(t, 0, <-code, errOut.String())
	require.Empty(t, zombies, "orphans left as zombies while COMMAND ran")
}

// zombiesOf lists the zombie children of pid.
func zombiesOf(t *testing.T, pid int) []int {
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var out []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, zombie, ok := readStat(p); ok && zombie && ppid == pid {
			out = append(out, p)
		}
	}
	return out
}

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		in     string
		ppid   int
		zombie bool
		ok     bool
	}{
		{"12 (sh) S 1 12 12 0 -1", 1, false, true},
		{"12 (a b) c)) R 7 12", 7, false, true},
		{"12 (sleep) Z 9 12", 9, true, true},
		{"12 (sleep) X 9 12", 9, true, true},
		{"12 (sh) S", 0, false, false},
		{"12 sh S 1", 0, false, false},
		{"12 (sh) SS 1", 0, false, false},
		{"12 (sh) S x", 0, false, false},
		{"", 0, false, false},
	} {
		ppid, zombie, ok := parseStat([]byte(tc.in))
		require.Equal(t, tc.ok, ok, tc.in)
		if ok {
			require.Equal(t, tc.ppid, ppid, tc.in)
			require.Equal(t, tc.zombie, zombie, tc.in)
		}
	}
	// This process's own line parses, with the parent the kernel reports.
	ppid, zombie, ok := readStat(os.Getpid())
	require.True(t, ok)
	require.False(t, zombie)
	require.Equal(t, os.Getppid(), ppid)
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte("12 (sh) S 1 12 12 0 -1"))
	f.Add([]byte("12 (a) b) Z 3"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ppid, _, ok := parseStat(b)
		if ok && !bytes.Contains(b, []byte(strconv.Itoa(ppid))) {
			t.Fatalf("parent %d is not in %q", ppid, b)
		}
	})
}
