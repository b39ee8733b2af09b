package harness

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/homelock/homelock"
	"github.com/homelock/homelock/fence"
)

// SoakOptions are `homelock soak`'s knobs.
type SoakOptions struct {
	// Duration is how long the workers lock; the faults stop with them.
	Duration time.Duration
	Nodes    int
	// Workers per node, each locking a random one of Keys, incrementing
	// its counter in the example store under the lock.
	Workers int
	Keys    int
	// FaultEvery is the mean pause between the end of one fault (the
	// cluster healed) and the next.
	FaultEvery time.Duration
	// Seed picks the faults, their nodes and their lengths.
	Seed uint64
	// Dir is where the temporary data directory goes ("": tmpfs if any).
	Dir string
	// Progress, if set, is told what happens as it happens.
	Progress func(event string)
	// Configure, if set, is applied to every node's config: a test that
	// switches a rule off (homelock.SetMutations) to show the soak sees it.
	Configure func(*homelock.Config)
	// KillsOnly leaves out the clean restarts (a node that left comes back
	// only after its restart gate, EpochLease + Skew): more faults a minute.
	KillsOnly bool
	// StopAtViolation ends the run at the first violation.
	StopAtViolation bool
}

// DefaultSoakOptions are `homelock soak` without flags.
func DefaultSoakOptions() SoakOptions {
	return SoakOptions{Duration: 10 * time.Minute, Nodes: 3, Workers: 2, Keys: 8, FaultEvery: 15 * time.Second, Seed: 1}
}

// Validate says what is wrong with o, in the command's flag names.
func (o SoakOptions) Validate() error {
	if o.Nodes < 3 {
		return fmt.Errorf("--nodes must be at least 3, got %d", o.Nodes)
	}
	return positive(flagCheck{"--duration", o.Duration > 0}, flagCheck{"--workers", o.Workers > 0},
		flagCheck{"--keys", o.Keys > 0}, flagCheck{"--fault-every", o.FaultEvery > 0})
}

// SoakReport is what a soak saw. Violations is empty on a correct run.
type SoakReport struct {
	Seconds float64 `json:"seconds"`
	// Sections are the increments the example store acknowledged, each in
	// a critical section of its own; Refused those it refused because the
	// section's lock had ended (a fault took it).
	Sections uint64 `json:"sections"`
	Refused  uint64 `json:"refused"`
	// Faults counts the faults by kind.
	Faults map[string]int `json:"faults"`
	// HealMaxMs is the longest time from a node's restart to every node
	// locking a key of every home; HealBoundMs the bound it must keep.
	HealMaxMs   float64 `json:"heal_max_ms"`
	HealBoundMs float64 `json:"heal_bound_ms"`
	// WouldRefuse is what the stores' shadow-mode Guards would have
	// refused: a stale write that reached a store.
	WouldRefuse uint64   `json:"would_refuse"`
	Violations  []string `json:"violations,omitempty"`
}

// Soak runs a local cluster for o.Duration with workers contending for a
// few keys, and kills or cleanly restarts one node at a time (a fault under
// way at the end runs on to its heal, so a run may last that much longer). It checks
// what a lock promises through the public API alone: no two valid handles
// for a key at once, tokens that grow, no acknowledged increment lost or
// doubled on any replica, no stale write at a store's Guard, and, after
// each restart, every node locking a key of every home within the bound
// docs/membership.md states. Its data is removed however it ends.
func Soak(ctx context.Context, o SoakOptions) (*SoakReport, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("soak: %w", err)
	}
	progress := o.Progress
	if progress == nil {
		progress = func(string) {}
	}
	start := time.Now()
	wd, err := startWorkDir(o.Dir, progress)
	if err != nil {
		return nil, err
	}
	defer wd.remove()
	progress("starting the cluster")
	c, err := startCluster(ctx, wd.sub("cluster"), o.Nodes, o.Configure)
	if err != nil {
		return nil, err
	}
	defer c.close()
	cfg := c.cfgs[0]
	s := &soak{
		c: c, o: o, progress: progress, nodes: slices.Clone(c.nodes),
		keys:  make(map[string]*keyCheck),
		rep:   &SoakReport{Faults: map[string]int{}},
		bound: cfg.DownAfter + cfg.EpochLease + cfg.Skew + 10*time.Second,
	}
	s.rep.HealBoundMs = ms(s.bound)
	for k := range o.Keys {
		name := fmt.Sprintf("soak-%d", k)
		s.names = append(s.names, name)
		s.keys[name] = &keyCheck{}
	}
	before, err := c.wouldRefuse(ctx)
	if err != nil {
		return nil, err
	}

	workCtx, stopWork := context.WithTimeout(ctx, o.Duration)
	defer stopWork()
	if o.StopAtViolation {
		s.stopWork = stopWork
	}
	var wg sync.WaitGroup
	for i := range o.Nodes {
		for w := range o.Workers {
			wg.Go(func() { s.work(workCtx, i, rand.New(rand.NewPCG(o.Seed, uint64(i*o.Workers+w)))) })
		}
	}
	faultErr := s.faults(ctx, workCtx, rand.New(rand.NewPCG(o.Seed, 1<<32)))
	if faultErr != nil {
		stopWork()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if faultErr != nil {
		return nil, faultErr
	}
	progress("checking the counters")
	s.checkCounters(ctx)
	after, err := c.wouldRefuse(ctx)
	if err != nil {
		return nil, err
	}
	s.rep.WouldRefuse = after - before
	if s.rep.WouldRefuse > 0 {
		s.violate("the stores' Guards would have refused %d writes: a stale writer's write reached a store", s.rep.WouldRefuse)
	}
	s.rep.Sections, s.rep.Refused = s.acked.Load(), s.refused.Load()
	s.rep.Seconds = time.Since(start).Seconds()
	return s.rep, nil
}

// soak is one run's state.
type soak struct {
	c        *cluster
	o        SoakOptions
	progress func(string)
	bound    time.Duration

	// mu guards nodes, the workers' view of the cluster: nil while a
	// node is down (c.nodes is the fault loop's own).
	mu    sync.RWMutex
	nodes []*homelock.Node

	names   []string // the keys the workers lock
	keys    map[string]*keyCheck
	acked   atomic.Uint64
	refused atomic.Uint64

	repMu sync.Mutex
	rep   *SoakReport
	// stopWork, if set, ends the run at the first violation.
	stopWork func()
}

func (s *soak) node(i int) *homelock.Node {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.nodes[i]
}

func (s *soak) setNode(i int, n *homelock.Node) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nodes[i] = n
}

func (s *soak) violate(format string, args ...any) {
	v := fmt.Sprintf(format, args...)
	s.repMu.Lock()
	defer s.repMu.Unlock()
	// A broken rule tends to break again and again: the first few say it.
	if len(s.rep.Violations) < 20 {
		s.rep.Violations = append(s.rep.Violations, v)
	}
	s.progress("VIOLATION: " + v)
	if s.stopWork != nil {
		s.stopWork()
	}
}

// work is one worker on node i: lock a random key, increment its counter,
// unlock, until ctx ends. A node that is down, or cannot lock for now (a
// fault under way), is waited for.
func (s *soak) work(ctx context.Context, i int, rng *rand.Rand) {
	for ctx.Err() == nil {
		n := s.node(i)
		if n == nil {
			_ = sleepUntil(ctx, time.Now().Add(10*time.Millisecond))
			continue
		}
		key := s.names[rng.IntN(len(s.names))]
		h, err := n.Lock(ctx, key, homelock.WithWait(2*time.Second))
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, homelock.ErrClosed) && !errors.Is(err, homelock.ErrTimeout) && !errors.Is(err, homelock.ErrLockUnavailable) {
				s.violate("node %s: Lock(%s): unexpected error: %v", n.ID(), key, err)
			}
			_ = sleepUntil(ctx, time.Now().Add(5*time.Millisecond))
			continue
		}
		kc := s.keys[key]
		sec := &section{node: n.ID(), tok: h.Token(), valid: h.Valid}
		if v := kc.enter(sec); v != "" {
			s.violate("%s: %s", key, v)
		}
		if err := increment(h.Context(), s.c.kvs[i], h, key); err == nil {
			kc.acked.Add(1)
			s.acked.Add(1)
		} else {
			s.refused.Add(1)
		}
		kc.exit(sec)
		_ = h.Unlock()
	}
}

// section is a critical section as the checker sees it.
type section struct {
	node  string
	tok   fence.Token
	valid func() error // the Handle's Valid
}

// keyCheck checks one key's sections as they are admitted.
type keyCheck struct {
	mu     sync.Mutex
	holder *section    // admitted and not yet unlocked
	last   fence.Token // the highest token admitted
	acked  atomic.Uint64
}

// enter admits sec and says what it breaks, if anything: a section still
// running whose handle is still valid (two valid handles for one key at
// once), or a token not above every earlier one.
func (k *keyCheck) enter(sec *section) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var v string
	if prev := k.holder; prev != nil {
		if err := prev.valid(); err == nil {
			v = fmt.Sprintf("%s admitted %s while %s's section under %s was still valid", sec.node, sec.tok, prev.node, prev.tok)
		}
	}
	if !k.last.Less(sec.tok) && v == "" {
		v = fmt.Sprintf("%s admitted %s, not above the %s admitted before it", sec.node, sec.tok, k.last)
	}
	k.holder = sec
	if k.last.Less(sec.tok) {
		k.last = sec.tok
	}
	return v
}

// exit ends sec, before its Unlock.
func (k *keyCheck) exit(sec *section) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.holder == sec {
		k.holder = nil
	}
}

// faults kills or cleanly restarts one node at a time until work ends,
// each after a pause of about o.FaultEvery once the last has healed. A
// fault under way when work ends still goes to its heal (ctx bounds that).
func (s *soak) faults(ctx, work context.Context, rng *rand.Rand) error {
	for {
		pause := time.Duration(rng.ExpFloat64() * float64(s.o.FaultEvery))
		if sleepUntil(work, time.Now().Add(max(pause, time.Second))) != nil {
			return nil
		}
		i := rng.IntN(len(s.c.nodes))
		kind := "kill"
		if rng.IntN(3) == 0 && !s.o.KillsOnly {
			kind = "clean restart"
		}
		// Down for up to twice DownAfter: shorter, the node comes back
		// a member; longer, it is removed and joins again.
		down := time.Duration(rng.Int64N(int64(2*s.c.cfgs[i].DownAfter + time.Second)))
		if err := s.restart(ctx, i, kind, down); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// restart stops node i (a kill, or a clean Close), waits down, starts it
// again from its data at its address, and waits until the cluster has
// healed.
func (s *soak) restart(ctx context.Context, i int, kind string, down time.Duration) error {
	n := s.c.nodes[i]
	addr := n.GRPCAddr()
	s.progress(fmt.Sprintf("%s of %s, down for %v", kind, n.ID(), down.Round(time.Millisecond)))
	s.setNode(i, nil)
	s.c.nodes[i] = nil
	if kind == "kill" {
		_ = n.Close(killed(ctx))
	} else {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.c.cfgs[i].EpochLease+s.c.cfgs[i].Skew+10*time.Second)
		err := n.Close(cctx)
		cancel()
		if err != nil {
			s.progress(fmt.Sprintf("%s: Close: %v", n.ID(), err))
		}
	}
	s.repMu.Lock()
	s.rep.Faults[kind]++
	s.repMu.Unlock()
	if err := sleepUntil(ctx, time.Now().Add(down)); err != nil {
		return err
	}
	started := time.Now()
	n2, err := s.c.reopen(ctx, i, addr)
	if err != nil {
		return err
	}
	s.setNode(i, n2)
	return s.heal(ctx, started)
}

// heal waits until every node sees every node a member of its epoch and
// has locked a fresh key of every home, and records how long that took from
// the restart; past the bound it is a violation.
func (s *soak) heal(ctx context.Context, restarted time.Time) error {
	hctx, cancel := context.WithDeadline(ctx, restarted.Add(s.bound))
	defer cancel()
	next := 0
	for i, n := range s.c.nodes {
		prefix := "heal-" + n.ID()
		for _, home := range s.c.nodes {
			// No key is homed at a node that was removed, or left, until
			// it has joined again; and the epoch may change under the
			// check (a member that flaps): each try reads the ring anew.
			key := s.c.keyHomedAt(s.c.ring(i), home.ID(), false, prefix, &next)
			for key == "" {
				if sleepUntil(hctx, time.Now().Add(10*time.Millisecond)) != nil {
					if ctx.Err() != nil {
						return nil
					}
					s.violate("%s's epoch %d lacks %s %v after the restart", n.ID(), n.Status().Epoch, home.ID(), s.bound)
					return nil
				}
				key = s.c.keyHomedAt(s.c.ring(i), home.ID(), false, prefix, &next)
			}
			if _, err := s.c.lockUntil(hctx, i, key); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				s.violate("%s could not lock %s (homed at %s) within %v of the restart: %v", n.ID(), key, home.ID(), s.bound, err)
				return nil
			}
		}
	}
	took := time.Since(restarted)
	s.repMu.Lock()
	s.rep.HealMaxMs = max(s.rep.HealMaxMs, ms(took))
	s.repMu.Unlock()
	s.progress(fmt.Sprintf("healed %v after the restart", took.Round(time.Millisecond)))
	return nil
}

// checkCounters requires every replica's counter of every key to end at
// the increments acknowledged on it (replication may trail: up to 10 s).
func (s *soak) checkCounters(ctx context.Context) {
	deadline := time.Now().Add(10 * time.Second)
	for _, key := range s.names {
		want := s.keys[key].acked.Load()
		for _, kv := range s.c.kvs {
			if got := settledCounter(ctx, kv, key, want, deadline); got != want {
				s.violate("%s: replica %s holds %d, but %d increments were acknowledged", key, kv.ID(), got, want)
			}
		}
	}
}
