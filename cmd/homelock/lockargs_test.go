package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/homelock/homelock"
	"github.com/homelock/homelock/clientapi"
)

func TestParseLockArgs(t *testing.T) {
	def := lockArgs{api: apiClientFlags{node: defaultAPIAddr}, nodes: []string{defaultAPIAddr}, wait: defaultWait, killAfter: defaultKillAfter}
	with := func(f func(*lockArgs)) lockArgs {
		a := def
		a.name, a.command = "k", []string{"cmd", "-x"}
		f(&a)
		return a
	}
	for _, tc := range []struct {
		args []string
		want lockArgs
		err  string // a usage error containing this; "help" for --help
	}{
		{args: []string{"k", "--", "cmd", "-x"}, want: with(func(*lockArgs) {})},
		{args: []string{"k", "--wait", "2s", "--", "cmd", "-x"}, want: with(func(a *lockArgs) { a.wait, a.waitSet = 2*time.Second, true })},
		{args: []string{"--wait", "2s", "k", "--", "cmd", "-x"}, want: with(func(a *lockArgs) { a.wait, a.waitSet = 2*time.Second, true })},
		{args: []string{"--node", "h:1", "k", "--lease", "1s", "--try", "--", "cmd", "-x"},
			want: with(func(a *lockArgs) { a.api.node, a.nodes, a.lease, a.try = "h:1", []string{"h:1"}, time.Second, true })},
		{args: []string{"k", "--kill-after", "0s", "cmd", "-x"}, want: with(func(a *lockArgs) { a.killAfter = 0 })},
		{args: []string{"k", "--release-at-exit", "--node", "a:1, b:2", "--", "cmd", "-x"},
			want: with(func(a *lockArgs) { a.releaseAtExit, a.api.node, a.nodes = true, "a:1, b:2", []string{"a:1", "b:2"} })},
		// Without --, COMMAND starts at the first argument after NAME that
		// is not a flag, and its flags are its own.
		{args: []string{"k", "cmd", "-x"}, want: with(func(*lockArgs) {})},
		{args: []string{"k", "cmd", "--wait", "1s"}, want: with(func(a *lockArgs) { a.command = []string{"cmd", "--wait", "1s"} })},
		// After --, everything is COMMAND's, a second -- too.
		{args: []string{"k", "--", "cmd", "--", "-x"}, want: with(func(a *lockArgs) { a.command = []string{"cmd", "--", "-x"} })},

		{args: nil, err: "no lock NAME"},
		{args: []string{"--", "cmd"}, err: "no lock NAME"},
		{args: []string{"--wait", "2s"}, err: "no lock NAME"},
		{args: []string{"", "--", "cmd"}, err: "empty lock NAME"},
		{args: []string{"k"}, err: "no COMMAND"},
		{args: []string{"k", "--"}, err: "no COMMAND"},
		{args: []string{"k", "extra", "--", "cmd"}, err: `unexpected argument "extra" before --`},
		{args: []string{"k", "--lease", "-1s", "--", "cmd"}, err: "--lease (-1s) must not be negative"},
		{args: []string{"k", "--lease", "50ms", "--", "cmd"}, err: "--lease (50ms) is below the shortest lease the protocol uses (100ms)"},
		{args: []string{"k", "--wait", "0s", "--", "cmd"}, err: "--wait (0s) must be positive"},
		{args: []string{"k", "--wait", "-2s", "--", "cmd"}, err: "--wait (-2s) must be positive"},
		{args: []string{"k", "--kill-after", "-1s", "--", "cmd"}, err: "--kill-after (-1s) must not be negative"},
		{args: []string{"k", "--node", "a:1,,b:2", "--", "cmd"}, err: `--node "a:1,,b:2": an empty address`},
		{args: []string{"k", "--nope", "--", "cmd"}, err: "flag provided but not defined: -nope"},
		{args: []string{"k", "--wait", "soon", "--", "cmd"}, err: `invalid value "soon" for flag -wait`},
		{args: []string{"--wait", "100000000h", "k", "--", "cmd"}, err: `invalid value "100000000h" for flag -wait`},
		{args: []string{"--help"}, err: "help"},
		{args: []string{"k", "-h", "--", "cmd"}, err: "help"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			a, err := parseLockArgs(tc.args, io.Discard)
			switch {
			case tc.err == "help":
				require.ErrorIs(t, err, flag.ErrHelp)
			case tc.err != "":
				require.ErrorContains(t, err, tc.err)
			default:
				require.NoError(t, err)
				require.Equal(t, tc.want, a)
			}
		})
	}
}

// Every refusal a node can send maps to its documented exit status, and the
// message says what happened.
func TestLockRefusalExitCodes(t *testing.T) {
	a := lockArgs{name: "k", api: apiClientFlags{node: "h:1"}, wait: 2 * time.Second}
	a.nodes = []string{"h:1"}
	tryArgs := a
	tryArgs.try = true
	listed := a
	listed.nodes = []string{"h:0", "h:1"}
	silentHome := clientapi.ToStatus(fmt.Errorf("%w: key %q: no answer from home n2", homelock.ErrLockUnavailable, "k"))
	for _, tc := range []struct {
		name string
		a    lockArgs
		err  error
		code int
		msg  string
		next bool // another node may grant it
	}{
		{"timeout", a, clientapi.ToStatus(homelock.ErrTimeout), exitTimedOut, "not acquired within --wait 2s", false},
		{"try", tryArgs, clientapi.ToStatus(homelock.ErrTimeout), exitTimedOut, "not acquired (--try)", false},
		{"ctx deadline", a, clientapi.ToStatus(fmt.Errorf("homelock: key %q: %w", "k", context.DeadlineExceeded)), exitTimedOut, "not acquired", false},
		{"no liveness", a, clientapi.ToStatus(homelock.ErrLockUnavailable), exitNoLocks, "unavailable through node h:1", true},
		{"silent home", a, silentHome, exitNoLocks, "no answer from home n2 (if that home is up, this node may be cut off from it: list another node too, --node A,B)", true},
		{"silent home, nodes listed", listed, silentHome, exitNoLocks, "no answer from home n2", true},
		{"hook", a, clientapi.ToStatus(homelock.ErrHookFailed), exitNoLocks, "unavailable", true},
		{"closing", a, clientapi.ToStatus(homelock.ErrClosed), exitNoLocks, "unavailable", true},
		{"too many", a, clientapi.ToStatus(homelock.ErrTooManyDelegations), exitNoLocks, "unavailable", true},
		{"bad lease", a, clientapi.ToStatus(homelock.ErrInvalidOption), exitUsage, "refused by node h:1 (--lease 0s, --wait 2s)", false},
		{"unreachable", a, status.Error(codes.Unavailable, "connection refused"), exitNoNode, "node h:1 unreachable: connection refused", true},
		{"not a homelock node", a, status.Error(codes.Unimplemented, "unknown service"), exitFailed, "unknown service", false},
		{"not grpc", a, errors.New("odd"), exitFailed, "odd", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := refusal(tc.a, tc.err)
			require.Equal(t, tc.code, e.code, e.msg)
			require.Contains(t, e.msg, tc.msg)
			if len(tc.a.nodes) > 1 {
				require.NotContains(t, e.msg, "list another node", "a hint to list nodes when several were")
			}
			require.Equal(t, tc.next, e.tryNext, "whether the next --node is tried")
		})
	}
}

// The exit statuses homelock documents are distinct, and each is in the
// help, the README and the command's doc.
func TestExitCodesDocumented(t *testing.T) {
	codes := []int{exitFailed, exitUsage, exitLost, exitNoNode, exitNoLocks, exitTimedOut, exitCannot, exitNotFound}
	seen := map[int]bool{}
	for _, c := range codes {
		require.False(t, seen[c], "exit status %d used twice", c)
		seen[c] = true
		require.Greater(t, c, 0)
		require.Less(t, c, 128, "exit status %d reads as a signal", c)
	}
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"lock", "--help"}, &out, &errOut))
	require.Contains(t, errOut.String(), exitCodesHelp)
	out.Reset()
	require.Equal(t, 0, run([]string{"--help"}, &out, &errOut))
	require.Contains(t, out.String(), exitCodesHelp)

	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	for _, c := range []int{exitFailed, exitUsage, exitLost, exitNoNode, exitNoLocks, exitTimedOut} {
		require.Contains(t, string(readme), fmt.Sprintf("| `%d` |", c), "README.md's table")
		require.Contains(t, string(doc), fmt.Sprintf("//\t%d ", c), "doc.go's table")
		require.Regexp(t, fmt.Sprintf(`(?m)^  %d\s`, c), exitCodesHelp, "--help's table")
	}
}

func TestHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{
		{"-h"}, {"--help"}, {"help"},
		{"lock", "-h"}, {"lock", "--help"}, {"lock", "k", "--help"},
		{"node", "-h"}, {"node", "--help"},
		{"status", "-h"}, {"status", "--help"},
		{"sim", "-h"}, {"sim", "--help"},
		{"harness", "-h"}, {"harness", "--help"},
		{"version", "-h"}, {"version", "--help"},
	} {
		var out, errOut bytes.Buffer
		require.Equal(t, 0, run(args, &out, &errOut), "%q: %s", args, errOut.String())
		require.Contains(t, out.String()+errOut.String(), "Usage", "%q", args)
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	for _, args := range [][]string{
		nil, {"frobnicate"},
		{"lock"}, {"lock", "k"}, {"lock", "k", "--wait", "-1s", "--", "true"}, {"lock", "--bogus", "k", "--", "true"},
		{"status", "--bogus"}, {"status", "extra"},
		{"node", "--bogus"},
		{"version", "extra"},
	} {
		var out, errOut bytes.Buffer
		require.Equal(t, exitUsage, run(args, &out, &errOut), "%q: %s", args, errOut.String())
	}
	var out, errOut bytes.Buffer
	run([]string{"lock", "k", "--lease", "10ms", "--", "true"}, &out, &errOut)
	require.Contains(t, errOut.String(), "--lease (10ms)", "the message names the flag")
}

func TestVersion(t *testing.T) {
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"version"}, &out, &errOut), errOut.String())
	require.Regexp(t, fmt.Sprintf(`^homelock \S.* \(lock protocol v%d, go1\.\d+`, homelock.ProtocolVersion), out.String())
}

// A port that accepts connections and never answers: --wait is kept on the
// lock command's own clock, not gRPC's 20 s connect timeout.
func TestLockWaitAgainstMuteListener(t *testing.T) {
	addr := muteListener(t)
	var out, errOut bytes.Buffer
	start := time.Now()
	code := run([]string{"lock", "k", "--node", addr, "--wait", "500ms", "--", "echo", "ran"}, &out, &errOut)
	took := time.Since(start)
	require.Equal(t, exitNoNode, code, errOut.String())
	require.Empty(t, out.String())
	require.Contains(t, errOut.String(), "did not answer within --wait 500ms")
	require.GreaterOrEqual(t, took, 500*time.Millisecond)
	require.Less(t, took, 500*time.Millisecond+answerMargin+time.Second, "--wait 500ms against a mute port took %v", took)
	t.Logf("--wait 500ms against a mute port: %v (exit %d)", took.Round(time.Millisecond), code)
}

// homelock status against a port that accepts and never answers (a paused
// node) gives up at --timeout and says why.
func TestStatusAgainstMuteListener(t *testing.T) {
	addr := muteListener(t)
	var out, errOut bytes.Buffer
	start := time.Now()
	code := run([]string{"status", "--node", addr, "--timeout", "300ms"}, &out, &errOut)
	took := time.Since(start)
	require.Equal(t, exitNoNode, code, errOut.String())
	require.Empty(t, out.String())
	require.Contains(t, errOut.String(), "did not answer within --timeout 300ms: paused")
	require.Less(t, took, 300*time.Millisecond+answerMargin+time.Second, "--timeout 300ms against a mute port took %v", took)
}

// A refused connection is "node unreachable" at once.
func TestLockNodeRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	var out, errOut bytes.Buffer
	start := time.Now()
	require.Equal(t, exitNoNode, run([]string{"lock", "k", "--node", addr, "--", "true"}, &out, &errOut), errOut.String())
	require.Contains(t, errOut.String(), "unreachable")
	require.Less(t, time.Since(start), 5*time.Second)
}

// muteListener accepts connections and holds them open without reading or
// writing, as a SIGSTOPped process's socket (the kernel accepts) does.
func muteListener(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	var conns []net.Conn
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				for _, c := range conns {
					_ = c.Close()
				}
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
	})
	return l.Addr().String()
}

// FuzzParseLockArgs: any command line either is refused or gives a lock
// the command can run: a NAME, a COMMAND, a --lease of 0 or at least
// minLease, a positive --wait, and at least one --node, none of them empty.
func FuzzParseLockArgs(f *testing.F) {
	for _, seed := range []string{
		"k -- cmd -x", "--node a:1,b:2 k --release-at-exit cmd", "k --lease 50ms -- cmd", "--wait 0s k -- cmd",
		"k --node , -- cmd", "-- cmd", "k", "--try k --kill-after 1s -- a -- b",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		a, err := parseLockArgs(strings.Fields(line), io.Discard)
		if err != nil {
			return
		}
		if a.name == "" || len(a.command) == 0 || a.wait <= 0 || a.killAfter < 0 || (a.lease != 0 && a.lease < minLease) || len(a.nodes) == 0 {
			t.Fatalf("%q parsed to a lock that cannot run: %+v", line, a)
		}
		for _, n := range a.nodes {
			if n == "" || strings.TrimSpace(n) != n {
				t.Fatalf("%q: --node %q passed an empty or untrimmed address: %q", line, a.api.node, a.nodes)
			}
		}
	})
}
