package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/homelock/homelock"
	"github.com/homelock/homelock/epoch"
	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/msg"
)

// idleDelegations measures what an idle delegation costs the node that
// holds it and the node that homes it: count delegations held by one node
// for keys homed at another, each side's live heap per delegation.
func idleDelegations(ctx context.Context, dir string, count int, r *Report) error {
	m, err := measureIdle(ctx, dir, count, nil, "")
	if err != nil {
		return err
	}
	r.record("idle_delegations", float64(m.held))
	r.record("heap_per_idle_delegation_holder", m.holder)
	r.record("heap_per_idle_delegation_home", m.home)
	r.record("heap_per_idle_delegation", m.holder+m.home)
	return nil
}

// idleHeap is what measureIdle found: the delegations held, and the live
// heap each added on its holder's node and on its home's.
type idleHeap struct {
	held         int
	holder, home float64
}

// idleLockers is how many goroutines take the idle delegations: each is a
// round trip to the home, and one at a time a million would take a minute.
const idleLockers = 32

// measureIdle opens a holder node and a home node in one process (long
// leases, so nothing lapses), has the holder take count delegations of keys
// homed at the other, and splits the heap they added between the two by
// killing the home: what goes with it is the home's share, less what the
// home node alone keeps, which a first pair with no delegations measured
// the same way. With a key ring the grants are signed, as a deployment's
// would be. profile, if set, gets a heap profile taken while the
// delegations are held. dir is removed when it ends.
func measureIdle(ctx context.Context, dir string, count int, ring *fence.KeyRing, profile string) (idleHeap, error) {
	var m idleHeap
	defer os.RemoveAll(dir)
	bare, err := idlePair(ctx, filepath.Join(dir, "bare"), 0, ring, "")
	if err != nil {
		return m, err
	}
	full, err := idlePair(ctx, filepath.Join(dir, "held"), count, ring, profile)
	if err != nil {
		return m, err
	}
	m.held = full.held
	if m.held > 0 {
		m.home = float64(full.homeGone-bare.homeGone) / float64(m.held)
		m.holder = float64(full.held0-full.open)/float64(m.held) - m.home
	}
	return m, nil
}

// pairHeap is one idlePair run: the live heap with both nodes open and
// available (open), with the delegations held (held0), and how much the
// home's kill freed (homeGone). Signed: after a kill with nothing held the
// heap may have grown, not shrunk.
type pairHeap struct {
	held                  int
	open, held0, homeGone int64
}

// idlePair runs one holder-and-home pair with count delegations and leaves
// nothing running; its directory is removed.
func idlePair(ctx context.Context, dir string, count int, ring *fence.KeyRing, profile string) (pairHeap, error) {
	var p pairHeap
	defer os.RemoveAll(dir)
	ids := []string{"home", "holder"}
	nodes := make([]*homelock.Node, len(ids))
	defer func() {
		for _, n := range nodes {
			if n != nil {
				_ = n.Close(killed(context.Background()))
			}
		}
	}()
	var cfgs []homelock.Config
	for i, id := range ids {
		cfg, err := nodeConfig(dir, id, ring)
		if err != nil {
			return p, err
		}
		cfg.Bootstrap, cfg.InitialMembers = true, ids
		if i > 0 {
			cfg.Join = []string{cfgs[0].GossipAddr}
		}
		cfg.MaxLease = 10 * time.Minute
		cfg.EpochLease = 20 * time.Minute
		cfg.Skew = 30 * time.Second
		cfg.DefaultWait = time.Minute
		cfg.MaxDelegations, cfg.MaxPerRequester = count+1, count+1
		cfgs = append(cfgs, cfg)
	}
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() { nodes[i], errs[i] = homelock.Open(ctx, cfgs[i]) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return p, fmt.Errorf("open %s: %w", ids[i], err)
		}
	}
	if err := (&cluster{nodes: nodes}).waitAvailable(ctx); err != nil {
		return p, err
	}
	home, holder := nodes[0], nodes[1]
	ring0 := statusRing(holder.Status())
	p.open = int64(heapInUse())
	if err := holdHomedAt(ctx, holder, ring0, home.ID(), count); err != nil {
		return p, err
	}
	p.held0 = int64(heapInUse())
	p.held = holder.Stats().Held
	if profile != "" {
		if err := writeHeapProfile(profile); err != nil {
			return p, err
		}
	}
	if err := home.Close(killed(ctx)); err != nil {
		return p, fmt.Errorf("kill the home: %w", err)
	}
	nodes[0] = nil
	p.homeGone = p.held0 - int64(heapInUse())
	return p, nil
}

// holdHomedAt has n lock and unlock count keys homed at node home, each
// made as a caller would make it (after the caller's baseline: the node
// keeps the string it was given, and that is part of what an idle
// delegation costs).
func holdHomedAt(ctx context.Context, n *homelock.Node, r *epoch.Ring, home string, count int) error {
	var next, held atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range idleLockers {
		wg.Go(func() {
			for held.Load() < int64(count) && ctx.Err() == nil {
				k := fmt.Sprintf("idle-%08d", next.Add(1))
				if h, _ := r.Home(k); string(h.ID) != home {
					continue
				}
				if held.Add(1) > int64(count) {
					return
				}
				h, err := n.Lock(ctx, k)
				if err != nil {
					firstErr.CompareAndSwap(nil, fmt.Errorf("idle delegation %s: %w", k, err))
					return
				}
				_ = h.Unlock()
			}
		})
	}
	wg.Wait()
	if err, ok := firstErr.Load().(error); ok {
		return err
	}
	return ctx.Err()
}

// statusRing is the key-to-home map of the epoch st reports.
func statusRing(st homelock.Status) *epoch.Ring {
	e := msg.Epoch{Number: st.Epoch, Caps: msg.Caps{Ring: msg.RingV1}}
	for _, m := range st.Members {
		e.Members = append(e.Members, msg.Member{ID: msg.NodeID(m.ID), Store: m.StoreID, Addr: m.Addr, Version: m.Version})
	}
	msg.SortMembers(e.Members)
	return epoch.NewRing(e)
}

// writeHeapProfile writes the heap profile to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC()
	err = pprof.Lookup("heap").WriteTo(f, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
