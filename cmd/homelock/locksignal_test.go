package main

import (
	"bytes"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// absorb keeps sig from killing the test process while it is sent to it
// (the lock command's own Notify may not be registered yet, or any more).
func absorb(t *testing.T, sig os.Signal) {
	c := make(chan os.Signal, 8)
	signal.Notify(c, sig)
	t.Cleanup(func() { signal.Stop(c) })
}

func waitFile(t *testing.T, path string, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%s never appeared", path)
		}
	}
}

// SIGINT, SIGTERM and SIGHUP to the lock command go to COMMAND, whose own
// status is the lock command's, and the lock is released only after
// COMMAND has exited (here it takes 300ms to finish its critical section).
func TestLockForwardsSignals(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			absorb(t, sig)
			dir := t.TempDir()
			started, finished, got := filepath.Join(dir, "started"), filepath.Join(dir, "finished"), filepath.Join(dir, "got")
			finishedAtRelease := make(chan bool, 1)
			addr := serveFake(t, &fakeNode{atRelease: func() {
				_, err := os.Stat(finished)
				finishedAtRelease <- err == nil
			}})
			name := map[syscall.Signal]string{syscall.SIGINT: "INT", syscall.SIGTERM: "TERM", syscall.SIGHUP: "HUP"}[sig]
			script := fmt.Sprintf(`trap 'echo %s > %q; sleep 0.3; touch %q; exit 3' %s; touch %q; i=0; while [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done`,
				name, got, finished, name, started)
			var out, errOut bytes.Buffer
			code := make(chan int, 1)
			go func() { code <- run([]string{"lock", "k", "--node", addr, "--", "sh", "-c", script}, &out, &errOut) }()
			waitFile(t, started, 10*time.Second)
			require.NoError(t, syscall.Kill(os.Getpid(), sig))
			select {
			case c := <-code:
				require.Equal(t, 3, c, "COMMAND's own status: %s", errOut.String())
			case <-time.After(15 * time.Second):
				t.Fatalf("the lock command did not end after %v", sig)
			}
			b, err := os.ReadFile(got)
			require.NoError(t, err, "COMMAND never got %v", sig)
			require.Equal(t, name+"\n", string(b))
			select {
			case ok := <-finishedAtRelease:
				require.True(t, ok, "the lock was released before COMMAND finished")
			case <-time.After(5 * time.Second):
				t.Fatal("the lock was never released")
			}
			require.Contains(t, errOut.String(), "passing "+sig.String()+" to COMMAND")
		})
	}
}

// A COMMAND that ignores the signal gets SIGKILL after --kill-after; the
// lock is held until then.
func TestLockKillsAfterForwarding(t *testing.T) {
	absorb(t, syscall.SIGTERM)
	dir := t.TempDir()
	started := filepath.Join(dir, "started")
	released := make(chan time.Time, 1)
	// A lease that cannot run out during the test: on a loaded machine the
	// default second's renewals may come late, and a lost lease would end the
	// command with 120 before the forwarded signal's kill is judged.
	addr := serveFake(t, &fakeNode{validFor: time.Minute, atRelease: func() { released <- time.Now() }})
	var out, errOut bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- run([]string{"lock", "k", "--node", addr, "--kill-after", "400ms", "--", "sh", "-c",
			fmt.Sprintf(`trap '' TERM; touch %q; sleep 30`, started)}, &out, &errOut)
	}()
	waitFile(t, started, 10*time.Second)
	sent := time.Now()
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
	select {
	case c := <-code:
		require.Equal(t, 128+9, c, errOut.String())
	case <-time.After(15 * time.Second):
		t.Fatal("COMMAND was not killed")
	}
	at := <-released
	require.GreaterOrEqual(t, at.Sub(sent), 400*time.Millisecond, "released before --kill-after")
}

// A signal while the lock command waits ends the wait: COMMAND never runs.
// So does one while it gives a node of several its connectBound to answer.
func TestLockSignalWhileWaiting(t *testing.T) {
	absorb(t, syscall.SIGINT)
	addr := muteListener(t)
	for _, tc := range []struct{ name, nodes string }{
		{"one node", addr},
		{"first of two", addr + "," + muteListener(t)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := make(chan int, 1)
			go func() {
				code <- run([]string{"lock", "k", "--node", tc.nodes, "--wait", "20s", "--", "echo", "ran"}, &out, &errOut)
			}()
			time.Sleep(300 * time.Millisecond)
			require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGINT))
			// Well inside connectBound (2 s), which a wait that missed the
			// signal would run out before seeing it.
			select {
			case c := <-code:
				require.Equal(t, 128+2, c, errOut.String())
			case <-time.After(connectBound / 2):
				t.Fatal("SIGINT did not end the wait")
			}
			require.Empty(t, out.String())
			require.Contains(t, errOut.String(), "COMMAND did not run")
		})
	}
}
