package main

import (
	"encoding/json"
	"fmt"
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
	for end := time.Now().Add(time.Minute); !strings.Contains(stderr.String(), "homelock sim: 1 of"); time.Sleep(10 * time.Millisecond) {
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
	// Every seed of the default mix admits sections (about 890 on average):
	// the report's totals show a batch whose workload did not run.
	require.GreaterOrEqual(t, rep.Admissions, int64(rep.Seeds)*100, "admissions over %d seeds", rep.Seeds)
	require.Greater(t, rep.Events, rep.Admissions)
	require.Contains(t, stderr.String(), "finishing the seeds that run")
	// stderr is not a terminal: progress lines, not a bar's redraws.
	require.Contains(t, stderr.String(), "homelock sim: 1 of 1000000 seeds from 41")
	require.NotContains(t, stderr.String(), "\r")
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

// --wipes adds disk wipes to the random faults: seed 5's schedule wipes a
// node with it and none without, and the wiped node comes back as a new
// store (its incarnation starts at 1 again).
func TestSimWipesFlag(t *testing.T) {
	trace := func(args ...string) string {
		var stdout, stderr lockedBuffer
		code := runSim(append([]string{"--seed", "5", "--trace"}, args...), &stdout, &stderr)
		require.Equal(t, 0, code, "%s%s", stdout.String(), stderr.String())
		return stdout.String()
	}
	require.NotContains(t, trace(), " wipe n")
	wiped := trace("--wipes")
	i := strings.Index(wiped, " wipe n")
	require.NotEqual(t, -1, i, "seed 5 with --wipes wiped nothing")
	node := strings.Fields(wiped[i:])[1]
	require.Contains(t, wiped[i:], "start "+node+" inc=1 epoch=none")
}

// The workload's shape flags reach the schedule: one hot key and no cold
// ones is every workload lock on hot-0, more lockers admit more sections;
// out of their bounds they are refused.
func TestSimWorkloadFlags(t *testing.T) {
	run := func(args ...string) (int, string, string) {
		var stdout, stderr lockedBuffer
		code := runSim(args, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	code, out, errOut := run("--seed", "3", "--hot-keys", "1", "--cold-keys", "0", "--lockers", "4", "--trace")
	require.Equal(t, 0, code, "%s%s", out, errOut)
	require.Contains(t, out, "hot-0")
	require.NotContains(t, out, "cold-")
	require.NotContains(t, out, "hot-1")

	admissions := func(args ...string) int {
		code, out, errOut := run(append([]string{"--seed", "3"}, args...)...)
		require.Equal(t, 0, code, "%s%s", out, errOut)
		var seed uint64
		var events, n int
		_, err := fmt.Sscanf(out, "seed %d: no violation (%d events, %d admissions", &seed, &events, &n)
		require.NoError(t, err, out)
		return n
	}
	require.Greater(t, admissions("--lockers", "6"), admissions())

	for _, tc := range []struct{ args, want string }{
		{"--lockers 0", "--lockers must be 1 to 8, got 0"},
		{"--lockers 9", "--lockers must be 1 to 8, got 9"},
		{"--hot-keys 0 --cold-keys 0", "not both 0; got 0 and 0"},
		{"--hot-keys 17", "--hot-keys must be 0 to 16"},
		{"--cold-keys 201", "--cold-keys 0 to 200"},
		{"--fault-fraction 0.95", "--fault-fraction must be 0.1 to 0.9, got 0.95"},
		{"--fault-fraction 0.6", "--duration 20s with --fault-fraction 0.6 leaves 8s healed, less than 9s"},
	} {
		code, _, errOut := run(append([]string{"--seeds", "1"}, strings.Fields(tc.args)...)...)
		require.Equal(t, 2, code, tc.args)
		require.Contains(t, errOut, tc.want, tc.args)
	}
}
