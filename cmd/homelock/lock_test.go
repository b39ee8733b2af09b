package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/homelock/homelock"
	"github.com/homelock/homelock/clientapi"
)

// fakeNode is a client API server that grants every lock with a fixed token
// valid for validFor (1s if zero), answers pings with that validity (all if
// answerPings is 0, else only the first answerPings, none if negative: then
// it is silent, a paused node), and, if loseAfter is set, reports the lease
// lost after that long.
type fakeNode struct {
	clientapi.UnimplementedClientServer
	loseAfter   time.Duration
	validFor    time.Duration
	answerPings int
	released    chan string
	// atRelease, if set, runs when the client unlocks, before RELEASED.
	atRelease func()
	// drains receives each request's drain_nanos, if set.
	drains chan time.Duration
	// refuse, if set, is every Lock's answer (as clientapi.ToStatus maps
	// homelock's errors), given refuseAfter after the request; asked counts
	// the requests, waited has the last one's wait and silence its
	// home_silence.
	refuse      error
	refuseAfter time.Duration
	// refuseFirst, if set, refuses only that many requests, then grants.
	refuseFirst int32
	asked       atomic.Int32
	waited      atomic.Int64
	silence     atomic.Int64
}

func (f *fakeNode) Lock(s clientapi.Client_LockServer) error {
	req, err := s.Recv()
	if err != nil {
		return err
	}
	n := f.asked.Add(1)
	f.waited.Store(req.GetWaitNanos())
	f.silence.Store(req.GetHomeSilenceNanos())
	if f.refuse != nil && (f.refuseFirst == 0 || n <= f.refuseFirst) {
		time.Sleep(f.refuseAfter)
		return clientapi.ToStatus(f.refuse)
	}
	if f.drains != nil {
		f.drains <- time.Duration(req.GetDrainNanos())
	}
	valid := int64(cmp.Or(f.validFor, time.Second))
	var sendMu sync.Mutex
	send := func(ev *clientapi.LockEvent) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return s.Send(ev)
	}
	if err := send(&clientapi.LockEvent{Kind: clientapi.LockEvent_KIND_ACQUIRED, Token: "e1.i2.c3", ValidForNanos: valid}); err != nil {
		return err
	}
	closed := make(chan error, 1)
	go func() {
		for answered := 0; ; {
			m, err := s.Recv()
			if err != nil {
				closed <- err
				return
			}
			if m.GetPing() != 0 && (f.answerPings == 0 || answered < f.answerPings) {
				answered++
				_ = send(&clientapi.LockEvent{Kind: clientapi.LockEvent_KIND_VALID, Ping: m.GetPing(), ValidForNanos: valid})
			}
		}
	}()
	var lose <-chan time.Time
	if f.loseAfter > 0 {
		lose = time.After(f.loseAfter)
	}
	select {
	case <-closed:
		if f.atRelease != nil {
			f.atRelease()
		}
		if f.released != nil {
			f.released <- req.GetKey()
		}
		return send(&clientapi.LockEvent{Kind: clientapi.LockEvent_KIND_RELEASED})
	case <-lose:
		return send(&clientapi.LockEvent{Kind: clientapi.LockEvent_KIND_LOST, Detail: "lease ran out"})
	}
}

func (f *fakeNode) Status(context.Context, *clientapi.StatusRequest) (*clientapi.StatusResponse, error) {
	b, _ := json.Marshal(clientapi.NewReport(homelock.Status{NodeID: "n1", Epoch: 4, Available: true,
		Members: []homelock.MemberStatus{{ID: "n1", Version: 1, Liveness: "alive", Self: true},
			{ID: "n2", Version: 1, Liveness: "alive", Heard: time.Now().Add(-90 * time.Second), Relayed: true},
			{ID: "n3", Version: 1, Liveness: "alive"}}}, homelock.Stats{}))
	return &clientapi.StatusResponse{Json: string(b)}, nil
}

func serveFake(t *testing.T, f *fakeNode) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	clientapi.RegisterClientServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// The command sees the token and key in its environment, the lock command
// exits with its status, and the lock is released when it exits.
func TestLockPassesTokenAndExitStatus(t *testing.T) {
	f := &fakeNode{released: make(chan string, 1)}
	addr := serveFake(t, f)
	var out, errOut bytes.Buffer
	code := run([]string{"lock", "jobs/nightly", "--node", addr, "--", "sh", "-c", `echo "$HOMELOCK_KEY $HOMELOCK_TOKEN"; exit 7`}, &out, &errOut)
	require.Equal(t, 7, code, errOut.String())
	require.Equal(t, "jobs/nightly e1.i2.c3\n", out.String())
	select {
	case k := <-f.released:
		require.Equal(t, "jobs/nightly", k)
	case <-time.After(5 * time.Second):
		t.Fatal("lock not released after the command exited")
	}

	out.Reset()
	require.Equal(t, 0, run([]string{"lock", "k", "--node", addr, "--", "true"}, &out, &errOut))
}

// A lost lease stops the command: SIGTERM first, and the status says so.
func TestLockStopsCommandWhenLeaseLost(t *testing.T) {
	addr := serveFake(t, &fakeNode{loseAfter: 200 * time.Millisecond, released: make(chan string, 1)})
	var out, errOut bytes.Buffer
	start := time.Now()
	code := run([]string{"lock", "k", "--node", addr, "--kill-after", "1s", "--", "sleep", "30"}, &out, &errOut)
	require.Equal(t, exitLost, code, errOut.String())
	require.Less(t, time.Since(start), 10*time.Second)
	require.Contains(t, errOut.String(), "lock lost")
	require.Contains(t, errOut.String(), "signal: terminated", "SIGTERM first")

	// A command that ignores SIGTERM gets SIGKILL after --kill-after.
	errOut.Reset()
	code = run([]string{"lock", "k", "--node", addr, "--kill-after", "300ms", "--", "sh", "-c", `trap "" TERM; sleep 30`}, &out, &errOut)
	require.Equal(t, exitLost, code, errOut.String())
	require.Contains(t, errOut.String(), "signal: killed")
}

// A node that goes silent (paused, cut off) sends no LOST: the command is
// stopped when the validity it last reported runs out on the client's clock,
// and not before while the node keeps answering pings.
func TestLockKeepsTheLeaseOnItsOwnClock(t *testing.T) {
	answering := serveFake(t, &fakeNode{validFor: 150 * time.Millisecond})
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"lock", "k", "--node", answering, "--", "sleep", "0.6"}, &out, &errOut),
		"pings kept a 150ms validity alive for 600ms: %s", errOut.String())

	silent := serveFake(t, &fakeNode{validFor: 300 * time.Millisecond, answerPings: 1})
	errOut.Reset()
	start := time.Now()
	code := run([]string{"lock", "k", "--node", silent, "--kill-after", "1s", "--", "sleep", "30"}, &out, &errOut)
	took := time.Since(start)
	require.Equal(t, exitLost, code, errOut.String())
	require.Contains(t, errOut.String(), "signal: terminated")
	require.Contains(t, errOut.String(), "no word from the node")
	require.Less(t, took, 300*time.Millisecond+5*time.Second)
	require.GreaterOrEqual(t, took, 280*time.Millisecond, "stopped before the validity ran out")

	// A node that never confirms the lease: the command does not start.
	mute := serveFake(t, &fakeNode{validFor: 100 * time.Millisecond, answerPings: -1})
	errOut.Reset()
	out.Reset()
	code = run([]string{"lock", "k", "--node", mute, "--", "echo", "ran"}, &out, &errOut)
	require.Equal(t, exitNoNode, code, errOut.String())
	require.Empty(t, out.String(), "the command ran without a confirmed lease")
	require.Contains(t, errOut.String(), "before COMMAND started")
}

func TestClientLease(t *testing.T) {
	t0 := time.Unix(100, 0)
	l := newClientLease()
	require.True(t, l.until().IsZero())
	l.extend(t0, time.Second)
	require.Equal(t, t0.Add(990*time.Millisecond), l.until(), "counted from the send, less drift")
	p1 := l.ping(t0.Add(100 * time.Millisecond))
	p2 := l.ping(t0.Add(200 * time.Millisecond))
	l.answered(p2, time.Second)
	require.Equal(t, t0.Add(1190*time.Millisecond), l.until(), "from ping 2's send")
	l.answered(p1, 5*time.Second)
	require.Equal(t, t0.Add(1190*time.Millisecond), l.until(), "an answer to an older ping is dropped")
	l.answered(99, time.Hour)
	require.Equal(t, t0.Add(1190*time.Millisecond), l.until(), "an unknown ping is ignored")
	l.extend(t0, 0)
	require.Equal(t, t0.Add(1190*time.Millisecond), l.until(), "nothing valid extends nothing")
}

// A suspend stops Go's monotonic clock, and its timers with it, but not the
// clock the lease is kept on: a lease that ran out during one reads as run
// out within leaseCheck of the resume, not after the validity it had left.
func TestWatchLeaseAcrossASuspend(t *testing.T) {
	for _, tc := range []struct {
		name string
		// answers: the node answers the ping sent after the resume,
		// saying the lock is still held.
		answers bool
		said    string
	}{
		{"node silent", false, "did not say the lock is still held"},
		{"node holds the lock", true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Real time, plus the suspends it is told of.
			var suspended atomic.Int64
			start := time.Now()
			now := func() time.Time {
				return time.Unix(1000, 0).Add(time.Since(start) + time.Duration(suspended.Load()))
			}
			l := newClientLease()
			l.extend(now(), time.Hour)
			ping := func() {
				if tc.answers {
					l.answered(l.ping(now()), time.Hour)
				}
			}
			var said lockedBuffer
			ranOut := make(chan string, 1)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go watchLease(ctx, l, now, ping, func(msg string) { _, _ = said.Write([]byte(msg + "\n")) }, ranOut)
			select {
			case why := <-ranOut:
				t.Fatalf("ran out with an hour left: %s", why)
			case <-time.After(3 * leaseCheck):
			}
			suspended.Add(int64(2 * time.Hour))
			if tc.answers {
				select {
				case why := <-ranOut:
					t.Fatalf("the lease the node renewed after the resume ran out: %s", why)
				case <-time.After(confirmWithin + 5*leaseCheck):
				}
				require.Contains(t, said.String(), "asking the node whether the lock is still held")
				require.Contains(t, said.String(), "the node says the lock is still held")
				return
			}
			select {
			case why := <-ranOut:
				require.Contains(t, why, tc.said)
			case <-time.After(5 * time.Second):
				t.Fatal("the lease that ran out during the suspend still reads as held")
			}
		})
	}
}

// A lease that runs out while the lock command runs (a silent node, not a
// stall) ends at its deadline; the watcher asked the node for word as it
// neared, and none came.
func TestWatchLeaseRunsOut(t *testing.T) {
	l := newClientLease()
	l.extend(time.Now(), 3*leaseCheck)
	var asked atomic.Int32
	ranOut := make(chan string, 1)
	go watchLease(context.Background(), l, time.Now, func() { asked.Add(1) }, func(string) {}, ranOut)
	select {
	case why := <-ranOut:
		require.Contains(t, why, "no word from the node")
		require.GreaterOrEqual(t, asked.Load(), int32(2), "asked the node as the deadline neared")
	case <-time.After(5 * time.Second):
		t.Fatal("the lease never ran out")
	}
}

// A renewal that reaches the node in the lease's last pingAhead is heard
// before the deadline: the watcher asks for pings then, and the first after
// the renewal brings the longer validity. Without that the command's only
// pings are the pinger's, a fifth of the first validity apart, and here
// none comes before the deadline.
func TestWatchLeaseHearsALateRenewal(t *testing.T) {
	start := time.Now()
	l := newClientLease()
	l.extend(start, 4*leaseCheck)
	renewed := start.Add(4*leaseCheck - pingAhead/2) // half of pingAhead before the deadline
	ping := func() {
		if time.Now().After(renewed) {
			l.answered(l.ping(time.Now()), time.Hour)
		}
	}
	ranOut := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go watchLease(ctx, l, time.Now, ping, func(string) {}, ranOut)
	select {
	case why := <-ranOut:
		t.Fatalf("ran out though the node renewed %v before the deadline: %s", pingAhead/2, why)
	case <-time.After(10 * leaseCheck):
	}
	require.Greater(t, time.Until(l.until()), 50*time.Minute)
}

func TestStatusTableAndJSON(t *testing.T) {
	addr := serveFake(t, &fakeNode{})
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"status", "--node", addr}, &out, &errOut), errOut.String())
	require.Contains(t, out.String(), "epoch 4")
	require.Contains(t, out.String(), "n1 (self)")
	// A member alive in gossip but silent on the peer protocol (a partial
	// partition) shows in HEARD, and so does its being reached through
	// relays.
	require.Regexp(t, `n2 .* alive +1m30(\.\d+)?s ago, relayed`, out.String())
	require.Regexp(t, `n3 .* alive +never\s*\n`, out.String(), "n3 is not relayed")
	out.Reset()
	require.Equal(t, 0, run([]string{"status", "--node", addr, "--json"}, &out, &errOut))
	var r clientapi.Report
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(out.String())), &r))
	require.Equal(t, uint64(4), r.Status.Epoch)
	require.Len(t, r.Status.Members, 3)
	require.Zero(t, r.Status.Members[0].HeardMSAgo, "self")
	require.GreaterOrEqual(t, r.Status.Members[1].HeardMSAgo, int64(90_000))
	require.Equal(t, int64(-1), r.Status.Members[2].HeardMSAgo, "never heard")
	require.True(t, r.Status.Members[1].Relayed)
	require.False(t, r.Status.Members[2].Relayed)
}

// status exits 121 when it cannot reach the node, as homelock lock does, and
// 1 when a node answered but not as one.
func TestStatusExitCodes(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refused := lis.Addr().String()
	require.NoError(t, lis.Close())
	mute, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never answers
	require.NoError(t, err)
	defer mute.Close()
	other := grpc.NewServer() // a gRPC server without homelock's API
	olis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = other.Serve(olis) }()
	defer other.Stop()
	for _, tc := range []struct {
		name, addr string
		code       int
	}{
		{"refused", refused, exitNoNode},
		{"mute", mute.Addr().String(), exitNoNode},
		{"not homelock", olis.Addr().String(), exitFailed},
	} {
		var out, errOut bytes.Buffer
		require.Equal(t, tc.code, run([]string{"status", "--node", tc.addr, "--timeout", "500ms"}, &out, &errOut), "%s: %s", tc.name, errOut.String())
	}
}

// The lock command tells the node how long it may take to end its stream
// once told to stop: --kill-after, then 2s for SIGKILL and the command's
// output. A shutting-down node waits that long, at least 10s and at most
// 10min, before it lets the lock go.
// refusedAddr is an address nothing listens on.
func refusedAddr(t *testing.T) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	require.NoError(t, lis.Close())
	return lis.Addr().String()
}

// With several --node addresses, a node that cannot grant the lock itself
// (unreachable, cut off, shutting down) gives way to the next; one that
// says what any node would (queued until --wait ran out) does not.
func TestLockTriesTheNextNode(t *testing.T) {
	refused := refusedAddr(t)
	mute, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never answers: paused
	require.NoError(t, err)
	defer mute.Close()
	for _, tc := range []struct {
		name  string
		first *fakeNode // nil: refused
		mute  bool      // the first node accepts and never answers
		code  int
		said  string
		asked bool // the second node was asked
	}{
		{"refused", nil, false, 0, "no connection", true},
		{"paused", nil, true, 0, "no answer within 2s: paused, cut off, or not a homelock node; trying", true},
		{"cut off", &fakeNode{refuse: homelock.ErrLockUnavailable}, false, 0, "unavailable through node", true},
		{"shutting down", &fakeNode{refuse: homelock.ErrClosed}, false, 0, "unavailable through node", true},
		{"queued", &fakeNode{refuse: homelock.ErrTimeout}, false, exitTimedOut, "not acquired within --wait", false},
		{"bad lease", &fakeNode{refuse: homelock.ErrInvalidOption}, false, exitUsage, "refused by node", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := refused
			switch {
			case tc.first != nil:
				first = serveFake(t, tc.first)
			case tc.mute:
				first = mute.Addr().String()
			}
			second := &fakeNode{}
			nodes := first + "," + serveFake(t, second)
			var out, errOut bytes.Buffer
			code := run([]string{"lock", "k", "--node", nodes, "--wait", "5s", "--", "true"}, &out, &errOut)
			require.Equal(t, tc.code, code, errOut.String())
			require.Contains(t, errOut.String(), tc.said)
			require.Equal(t, tc.asked, second.asked.Load() == 1, errOut.String())
		})
	}
	t.Run("one wait", func(t *testing.T) {
		// --wait bounds the whole acquisition: the next node is given what
		// the first left of it. The first, with a node after it, gives way
		// to a silent home after a second; the last waits for it to the end.
		first := &fakeNode{refuse: homelock.ErrLockUnavailable, refuseAfter: time.Second}
		second := &fakeNode{}
		var out, errOut bytes.Buffer
		code := run([]string{"lock", "k", "--node", serveFake(t, first) + "," + serveFake(t, second), "--wait", "5s", "--", "true"}, &out, &errOut)
		require.Equal(t, 0, code, errOut.String())
		require.LessOrEqual(t, time.Duration(second.waited.Load()), 4*time.Second, errOut.String())
		require.Equal(t, time.Second, time.Duration(first.silence.Load()), "home silence asked of the first node")
		require.Zero(t, second.silence.Load(), "home silence asked of the last node")
		require.Equal(t, 500*time.Millisecond, homeSilence(time.Second), "half of a short wait")
	})
	t.Run("none", func(t *testing.T) {
		var out, errOut bytes.Buffer
		code := run([]string{"lock", "k", "--node", refused + "," + refused, "--", "true"}, &out, &errOut)
		require.Equal(t, exitNoNode, code, errOut.String())
		require.Equal(t, 2, strings.Count(errOut.String(), "connection refused"), errOut.String())
		require.Equal(t, 2, strings.Count(errOut.String(), "is the node running"), errOut.String())
	})
	t.Run("empty", func(t *testing.T) {
		var out, errOut bytes.Buffer
		require.Equal(t, exitUsage, run([]string{"lock", "k", "--node", refused + ",", "--", "true"}, &out, &errOut))
		require.Contains(t, errOut.String(), "an empty address")
	})
	t.Run("status", func(t *testing.T) {
		var out, errOut bytes.Buffer
		require.Equal(t, 0, run([]string{"status", "--node", refused + "," + serveFake(t, &fakeNode{})}, &out, &errOut), errOut.String())
		require.Contains(t, errOut.String(), "trying")
		require.Contains(t, out.String(), "node n1")
		require.Equal(t, exitNoNode, run([]string{"status", "--node", refused + "," + refused}, &out, &errOut))
	})
}

// A node that answers that it cannot serve yet (not a member in its restart
// gate, no liveness, a mixed cluster during a roll) is asked again while
// --wait lasts, and its refusal is printed once, not every round; one that
// does not answer, or --try, is not waited for.
func TestLockAsksAgainWithinWait(t *testing.T) {
	gate := fmt.Errorf("%w: key \"k\": this node is not a member of epoch 2 as it runs now: restart gate: 4.2s left", homelock.ErrLockUnavailable)
	t.Run("a node in its restart gate", func(t *testing.T) {
		f := &fakeNode{refuse: gate, refuseFirst: 4}
		var out, errOut bytes.Buffer
		start := time.Now()
		code := run([]string{"lock", "k", "--node", serveFake(t, f), "--wait", "5s", "--", "true"}, &out, &errOut)
		require.Equal(t, 0, code, errOut.String())
		require.EqualValues(t, 5, f.asked.Load(), "asked until it granted")
		require.Equal(t, 1, strings.Count(errOut.String(), "restart gate"), errOut.String())
		require.Contains(t, errOut.String(), "asking again within --wait")
		require.Equal(t, withoutDigits("restart gate: 4.2s left"), withoutDigits("restart gate: 3.95s left"), "a countdown is one refusal")
		// Rounds 100, 200, 400 and 800 ms apart.
		require.Less(t, time.Since(start), 4*time.Second)
	})
	t.Run("unavailable to the end of --wait", func(t *testing.T) {
		f := &fakeNode{refuse: gate}
		var out, errOut bytes.Buffer
		start := time.Now()
		code := run([]string{"lock", "k", "--node", serveFake(t, f), "--wait", "1500ms", "--", "true"}, &out, &errOut)
		took := time.Since(start)
		require.Equal(t, exitNoLocks, code, errOut.String())
		require.GreaterOrEqual(t, took, 1500*time.Millisecond-minLease, "gave up before --wait")
		require.Less(t, took, 3*time.Second, "waited past --wait")
		require.Greater(t, f.asked.Load(), int32(2))
		require.Equal(t, 2, strings.Count(errOut.String(), "restart gate"), "once asking again, once giving up: %s", errOut.String())
	})
	t.Run("--try", func(t *testing.T) {
		f := &fakeNode{refuse: gate}
		var out, errOut bytes.Buffer
		require.Equal(t, exitNoLocks, run([]string{"lock", "k", "--node", serveFake(t, f), "--try", "--", "true"}, &out, &errOut), errOut.String())
		require.EqualValues(t, 1, f.asked.Load())
	})
	t.Run("unreachable", func(t *testing.T) {
		var out, errOut bytes.Buffer
		start := time.Now()
		require.Equal(t, exitNoNode, run([]string{"lock", "k", "--node", refusedAddr(t), "--wait", "5s", "--", "true"}, &out, &errOut), errOut.String())
		require.Less(t, time.Since(start), 2*time.Second, "waited for a node that is not there")
	})
}

func TestLockAsksForItsDrainTime(t *testing.T) {
	f := &fakeNode{drains: make(chan time.Duration, 2)}
	addr := serveFake(t, f)
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"lock", "k", "--node", addr, "--", "true"}, &out, &errOut), errOut.String())
	require.Equal(t, defaultKillAfter+2*time.Second, <-f.drains)
	require.Equal(t, 0, run([]string{"lock", "k", "--node", addr, "--kill-after", "30s", "--", "true"}, &out, &errOut), errOut.String())
	require.Equal(t, 32*time.Second, <-f.drains)

	for asked, want := range map[time.Duration]time.Duration{
		0:                lockDrainWait,
		7 * time.Second:  lockDrainWait,
		32 * time.Second: 33 * time.Second,
		time.Hour:        maxLockDrainWait,
	} {
		require.Equal(t, want, drainWait(asked), "asked %v", asked)
	}
}
