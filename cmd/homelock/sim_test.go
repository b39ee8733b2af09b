package main

import (
	"encoding/json"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A signal ends a long sim run with a report of the seeds it ran, from
// --first on with no gap, and the signal's exit status: a million-seed run
// stopped at 90% still says what it covered.
func TestSimStoppedBySignal(t *testing.T) {
	absorb(t, syscall.SIGINT)
	var stdout, stderr lockedBuffer
	code := make(chan int, 1)
	go func() {
		code <- runSim([]string{"--seeds", "1000000", "--first", "41", "--workers", "2", "--json"}, &stdout, &stderr)
	}()
	for end := time.Now().Add(time.Minute); !strings.Contains(stderr.String(), "it/s"); time.Sleep(10 * time.Millisecond) {
		require.False(t, time.Now().After(end), "no progress after a minute: %s", stderr.String())
	}
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGINT))
	select {
	case c := <-code:
		require.Equal(t, 130, c, "stderr: %s", stderr.String())
	case <-time.After(time.Minute):
		t.Fatal("the sim did not stop a minute after SIGINT")
	}
	var rep simReport
	require.NoError(t, json.Unmarshal([]byte(stdout.String()), &rep), stdout.String())
	require.Equal(t, "interrupt", rep.Stopped)
	require.Equal(t, uint64(41), rep.FirstSeed)
	require.Positive(t, rep.Seeds)
	require.Less(t, rep.Seeds, 1000000)
	require.Equal(t, uint64(rep.Seeds), rep.LastSeed-rep.FirstSeed+1)
	require.Zero(t, rep.Violations)
	require.Contains(t, stderr.String(), "finishing the seeds that run")
}

// --slow-hooks runs random schedules with slow store hooks, within its
// bound; a failing seed's replay names it (cluster_test's
// TestSimReportReplaysConfig).
func TestSimSlowHooksFlag(t *testing.T) {
	var stdout, stderr lockedBuffer
	require.Equal(t, 0, runSim([]string{"--seed", "28", "--slow-hooks", "1.2s"}, &stdout, &stderr), "%s%s", stdout.String(), stderr.String())
	require.Contains(t, stdout.String(), "seed 28: no violation")
	var out, errOut lockedBuffer
	require.Equal(t, 2, runSim([]string{"--seeds", "1", "--slow-hooks", "3s"}, &out, &errOut))
	require.Contains(t, errOut.String(), "--slow-hooks must be 0 to 2s, got 3s")
}

// --lease replays the schedules whose lease is not the default (seed 30076
// of cluster_test's TestSimSlowHooks), within its bounds.
func TestSimLeaseFlag(t *testing.T) {
	var stdout, stderr lockedBuffer
	require.Equal(t, 0, runSim([]string{"--seed", "30076", "--slow-hooks", "300ms", "--lease", "400ms"}, &stdout, &stderr), "%s%s", stdout.String(), stderr.String())
	require.Contains(t, stdout.String(), "seed 30076: no violation")
	var out, errOut lockedBuffer
	require.Equal(t, 2, runSim([]string{"--seeds", "1", "--lease", "3s"}, &out, &errOut))
	require.Contains(t, errOut.String(), "--lease must be 150ms to 2.9s, got 3s")
}
