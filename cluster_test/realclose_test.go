package clustertest

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homelock/homelock"
	"github.com/homelock/homelock/msg"
)

// Issue 3, Close hands off (a controlled shutdown): n1 is home of a key whose
// delegation n2 holds. n1.Close(ctx) relinquishes nothing of its own here, but
// asks the members to agree an epoch without it, recalls n2's delegation, and
// keeps answering: n3 then locks the key from its new home, which pulls a
// clean Drained from n1 instead of waiting out its activation gate
// (learnedAt + EpochLease + Skew, all after Close began). So the key is
// granted well before that gate could pass, Close returns nil only after it
// (it lingers for late drain queries), and the token grows across the move.
// Without the handoff no epoch drops n1; without the linger n1 is gone when
// the query comes and the new home waits the gate out: either fails here.
func TestRealCloseHandsOff(t *testing.T) {
	// A longer epoch lease than the other tests widens the gate the handoff
	// must beat: a few round trips against 1.25s (raceScale times that under
	// -race).
	lease := 2 * rcEpochLease
	gate := lease + rcSkew
	c := newRCluster(t, 3, rcOptions{tweak: func(cfg *homelock.Config) { cfg.EpochLease = lease }})
	x, y, z := c.nodes[0], c.nodes[1], c.nodes[2]
	key := c.keyHomedAt(x.ID(), "close")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	h, err := y.node.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	before := h.Token()
	if _, err := y.kv.Put(ctx, h, key, []byte("by n2 before the close")); err != nil {
		t.Fatal(err)
	}
	if err := h.Unlock(); err != nil {
		t.Fatal(err)
	}
	if s := y.node.Stats(); s.Held == 0 {
		t.Fatalf("n2 holds no delegation before the close: %+v", s)
	}

	start := time.Now()
	closed := make(chan error, 1)
	var closeTook time.Duration
	go func() {
		err := x.node.Close(ctx)
		closeTook = time.Since(start)
		closed <- err
	}()

	without := func(r *rnode) bool { return !slices.Contains(statusMemberIDs(r.node), x.ID()) }
	waitFor(t, gate, "an epoch without n1 on n2 and n3", func() bool { return without(y) && without(z) })
	left := time.Since(start)
	waitFor(t, gate, "n1 to grant and hold nothing", func() bool {
		s := x.node.Stats()
		return s.Live == 0 && s.Held == 0
	})
	handed := time.Since(start)
	// n1's Close has nothing left to do now but linger; give it time to stop
	// if it did not, so that only a lingering n1 can answer the query.
	time.Sleep(100 * time.Millisecond)

	asked := time.Since(start)
	h, err = z.node.Lock(ctx, key)
	locked := time.Since(start)
	if err != nil {
		c.dump()
		t.Fatalf("n3 locking the key n1 was home for, during n1's close: %v", err)
	}
	after := h.Token()
	if !before.Less(after) {
		t.Errorf("token %s from the new home after %s", after, before)
	}
	if _, err := z.kv.Put(ctx, h, key, []byte("by n3 after the close")); err != nil {
		t.Errorf("write under the new home's token: %v", err)
	}
	if err := h.Unlock(); err != nil {
		t.Error(err)
	}
	if err := <-closed; err != nil {
		t.Errorf("n1.Close: %v", err)
	}
	newHome := c.homeOf(2, key)
	t.Logf("n1.Close began; epoch without n1 learned by %v, n1 idle by %v, n3 asked at %v and was granted the key by its new home %s at %v, Close returned at %v; gate EpochLease + Skew = %v; tokens %s -> %s",
		left.Round(time.Millisecond), handed.Round(time.Millisecond), asked.Round(time.Millisecond), newHome, locked.Round(time.Millisecond), closeTook.Round(time.Millisecond), gate, before, after)
	if newHome == x.ID() || newHome == "" {
		t.Errorf("key %q homed at %q after n1 left", key, newHome)
	}
	if locked > gate/2 {
		t.Errorf("the key was granted %v after Close began, not well before the %v gate: no clean Drained from n1", locked, gate)
	}
	if closeTook < gate {
		t.Errorf("Close returned %v after it began, before the new homes' gates (%v) would pass: it did not keep answering drain queries", closeTook, gate)
	}
	for _, r := range []*rnode{y, z} {
		if ids := statusMemberIDs(r.node); !slices.Equal(ids, []string{y.ID(), z.ID()}) {
			t.Errorf("%s's epoch has members %v after n1's close", r.ID(), ids)
		}
	}
}

// Issue 3, Close does not leave while another member is down: n3 is killed
// (failure detection is slowed, so it stays in the epoch) and n1 closes
// cleanly. Leaving would make {n2, n3} the epoch, whose majority is not
// alive; so n1 skips the handoff, says so in its log, and shuts down at once
// and without error. n2's epoch still has all three.
func TestRealCloseSkipsHandoffWithMemberDown(t *testing.T) {
	var logs syncBuffer
	c := newRCluster(t, 3, rcOptions{tweak: func(cfg *homelock.Config) {
		cfg.DownAfter = time.Minute
		if cfg.NodeID == "n1" {
			cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		}
	}})
	n1, n2 := c.nodes[0], c.nodes[1]
	c.crash(2, true)
	waitFor(t, 10*time.Second, "n1's gossip to see n3 down", func() bool {
		for _, m := range n1.node.Status().Members {
			if m.ID == "n3" {
				return m.Liveness != "alive"
			}
		}
		return false
	})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := n1.node.Close(ctx); err != nil {
		t.Errorf("n1.Close: %v", err)
	}
	took := time.Since(start)
	t.Logf("n1.Close with n3 down took %v (EpochLease %v)", took.Round(time.Millisecond), rcEpochLease)
	if took > rcEpochLease {
		t.Errorf("Close took %v: it should neither hand off nor linger", took)
	}
	if ids := statusMemberIDs(n2.node); !slices.Equal(ids, []string{"n1", "n2", "n3"}) {
		t.Errorf("n2's epoch has members %v, want n1, n2 and n3 still", ids)
	}
	if out := logs.String(); !strings.Contains(out, "not handing home keys off") || !strings.Contains(out, "n3") {
		t.Errorf("n1 did not log why it kept its home keys; its log:\n%s", out)
	}
}

// Issue 3, restart after a clean close: n2 closes cleanly (the epoch drops it)
// and is opened again on the same store. It is not a member, so it asks to
// join on its own, but not before its restart gate (EpochLease + Skew after
// Open) has passed: the keys that move back to it would wait on that gate
// anyway. Once it is a member again, a key homed at it is granted by its new
// incarnation with a larger token.
func TestRealRestartAfterCleanClose(t *testing.T) {
	gate := rcEpochLease + rcSkew
	c := newRCluster(t, 3, rcOptions{})
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	key := c.keyHomedAt(n2.ID(), "back")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	h, err := n1.node.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	before := h.Token()
	if err := h.Unlock(); err != nil {
		t.Fatal(err)
	}

	if err := n2.node.Close(ctx); err != nil {
		t.Fatalf("n2.Close: %v", err)
	}
	for _, r := range []*rnode{n1, n3} {
		if ids := statusMemberIDs(r.node); slices.Contains(ids, n2.ID()) {
			t.Fatalf("%s's epoch still has n2 after its clean close: %v", r.ID(), ids)
		}
	}

	start := time.Now()
	c.reopen(ctx, 1)
	joins := func() uint64 { return n2.node.Stats().ByKind[msg.KindJoin.String()].Sent.Msgs }
	var asked time.Duration
	waitFor(t, gate+5*time.Second, "n2 to ask to join", func() bool {
		if joins() == 0 {
			return false
		}
		asked = time.Since(start)
		return true
	})
	waitFor(t, 5*time.Second, "an epoch with n2 again", func() bool {
		return slices.Contains(statusMemberIDs(n1.node), n2.ID()) && slices.Contains(statusMemberIDs(n3.node), n2.ID())
	})
	rejoined := time.Since(start)
	h, err = n3.node.Lock(ctx, key)
	if err != nil {
		c.dump()
		t.Fatalf("lock of a key homed at the rejoined n2: %v", err)
	}
	locked := time.Since(start)
	after := h.Token()
	_ = h.Unlock()
	t.Logf("n2 reopened (incarnation %d): first Join sent at %v, member again at %v, key granted at %v (restart gate %v); tokens %s -> %s",
		n2.node.Incarnation(), asked.Round(time.Millisecond), rejoined.Round(time.Millisecond), locked.Round(time.Millisecond), gate, before, after)
	if asked < gate {
		t.Errorf("n2 asked to join %v after Open, before its restart gate (%v) ended", asked, gate)
	}
	if home := c.homeOf(0, key); home != n2.ID() {
		t.Errorf("key %q homed at %q after n2 rejoined", key, home)
	}
	if !before.Less(after) || after.Incarnation != n2.node.Incarnation() {
		t.Errorf("token %s after %s; want one from n2's incarnation %d", after, before, n2.node.Incarnation())
	}
}

// Issue 3, Close cut short: n2 holds a delegation n1 granted, and n2's
// barrier hook never settles, so n2 cannot release it when n1, closing,
// recalls it; n1 would have to wait the lease out. Close's ctx ends first:
// Close stops the handoff, shuts down all the same, and its error wraps the
// deadline and says the home keys were not handed off.
func TestRealCloseCutShort(t *testing.T) {
	c := newRCluster(t, 3, rcOptions{tweak: func(cfg *homelock.Config) {
		if cfg.NodeID == "n2" {
			cfg.Barrier = func(ctx context.Context, _ string, _ []byte) ([]byte, error) {
				<-ctx.Done()
				return nil, ctx.Err()
			}
		}
	}})
	x, y := c.nodes[0], c.nodes[1]
	key := c.keyHomedAt(x.ID(), "cut")
	h, err := y.node.Lock(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	_ = h.Unlock()

	const wait = 100 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	start := time.Now()
	err = x.node.Close(ctx)
	took := time.Since(start)
	t.Logf("n1.Close with a %v context returned after %v: %v", wait, took.Round(time.Millisecond), err)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "home keys not handed off") {
		t.Errorf("Close cut short returned %v, want the deadline and that the home keys were not handed off", err)
	}
	if took > wait+raceScale*250*time.Millisecond {
		t.Errorf("Close returned %v after it began, long after its %v context ended", took, wait)
	}
}

// Every node closes cleanly at once (a whole cluster shut down, as the
// harness and `homelock node` under a service manager do): the members
// leave one after another until one is left, which cannot leave and skips
// the handoff. Every Close returns, without error, within a few gates.
func TestRealCloseAllAtOnce(t *testing.T) {
	gate := rcEpochLease + rcSkew
	c := newRCluster(t, 3, rcOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	took := make([]time.Duration, len(c.nodes))
	for i, r := range c.nodes {
		wg.Go(func() {
			if err := r.node.Close(ctx); err != nil {
				t.Errorf("%s.Close: %v", r.ID(), err)
			}
			took[i] = time.Since(start)
		})
	}
	wg.Wait()
	t.Logf("three clean Closes at once returned after %v (gate %v)", took, gate)
	if slowest := slices.Max(took); slowest > 3*gate {
		t.Errorf("the last Close returned %v after they began, over three gates (%v)", slowest, 3*gate)
	}
}

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
