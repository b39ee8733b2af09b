package clustertest

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/homelock/homelock"
)

// H25: n1 is killed while n2 holds a key homed at it, and n1 comes back at
// once on a wiped disk under the same ID (operations.md's "wipe and rejoin",
// or a container whose data did not outlive it). The new store is a new
// member: it never served the old store's keys and cannot know the
// delegations the old one granted, so it must not grant such a key before
// its activation gate has passed (EpochLease + Skew from learning the epoch
// that made it a member), by which time every old delegation has ended.
// Before the fix it took the old store's epochs for its own (the ring names
// node IDs), carried the key's gate back to epoch 1, where nobody had
// granted, and granted n3 the key 1 ms after it joined, while n2's
// delegation still ran for over a second.
func TestWipedHomeGrantsNothingItsOldStoreMayHaveGranted(t *testing.T) {
	const (
		epochLease = 3 * time.Second
		skew       = 150 * time.Millisecond
	)
	c := newRCluster(t, 3, rcOptions{tweak: func(cfg *homelock.Config) {
		cfg.EpochLease, cfg.MaxLease, cfg.Skew = epochLease, 2*time.Second, skew
	}})
	key := c.keyHomedAt("n1", "wiped")
	ctx := context.Background()
	held, err := c.nodes[1].node.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	addr := c.nodes[0].node.GRPCAddr()
	c.crash(0, false)
	cfg := c.nodes[0].cfg
	cfg.DataDir = filepath.Join(t.TempDir(), "wiped")
	cfg.GRPCAddr = addr
	cfg.Bootstrap, cfg.InitialMembers = false, nil
	cfg.Join = []string{c.nodes[1].cfg.GossipAddr}
	start := time.Now()
	// Until gossip has found the old process gone, the members take the new
	// store for a second live n1 and refuse it (ErrDuplicateNodeID); an
	// operator starts it again, as this does.
	var wiped *homelock.Node
	refused := 0
	for {
		wiped, err = homelock.Open(ctx, cfg)
		if !errors.Is(err, homelock.ErrDuplicateNodeID) || time.Since(start) > 10*time.Second {
			break
		}
		refused++
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = wiped.Close(killed()) }()
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	next, err := c.nodes[2].node.Lock(lctx, key)
	if err != nil {
		t.Fatalf("n3 never got %s from the wiped n1: %v", key, err)
	}
	took := time.Since(start)
	if held.Valid() == nil {
		t.Fatalf("n3 got %s (%s) %v after the wiped n1 started, while n2 still held it (%s): two holders", key, next.Token(), took, held.Token())
	}
	if took < epochLease {
		t.Errorf("n3 got %s %v after the wiped n1 started, before its gate (%v)", key, took, epochLease+skew)
	}
	if !held.Token().Less(next.Token()) {
		t.Errorf("token %s after the wipe, not above %s", next.Token(), held.Token())
	}
	t.Logf("n2 held %s (%s); n1 wiped and back (refused as a duplicate %d times first): n3 got it %v later (%s), once n2's had ended", key, held.Token(), refused, took.Round(time.Millisecond), next.Token())
	_ = next.Unlock()
	_ = held.Unlock()
}
