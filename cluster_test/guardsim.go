package clustertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/homelock/homelock/fence"
)

// Invariants of the guarded store (docs/design.md, invariants 3 and 4).
const (
	invGuardOrder = "G3 the Guard never accepts a stale token"
	invGuardLost  = "G4 nothing acknowledged as synced is lost"
	invGuardOnce  = "G6 an operation is applied at most once while its receipt is kept"
)

// guardEvery: one seed in guardEvery runs the guarded store. Opening a
// Pebble per seed and syncing every write costs several times a plain
// seed's run, which the seeds-per-second target cannot carry in every
// seed.
var guardEvery uint64 = 8

// guardStore is the protected resource inside the simulated world: every
// critical section's write goes through a fence.Guard on a Pebble on a
// crashable MemFS, whether or not its handle is still valid (a paused
// writer's late write is exactly what the Guard must refuse). The store
// crashes now and then, dropping unsynced data, and is reopened from
// what survived.
type guardStore struct {
	s   *Sim
	fs  *vfs.MemFS
	db  *pebble.DB
	g   *fence.Guard
	rng *rand.Rand
	ops int
	// Per resource, what was acknowledged: every receipt, the highest
	// token and the value of the write under it.
	acked   map[string][]guardAck
	highest map[string]fence.Token
	value   map[string][]byte
	// checked counts, per resource, the receipts a crash already found.
	checked map[string]int
	// pruned is, per resource, the fence its receipts were pruned below;
	// crashedAt, the highest token acknowledged at the last crash, which the
	// next crash prunes below; marked, the highest token acknowledged at the
	// resource's last prune between crashes, which its next one prunes below.
	pruned    map[string]fence.Token
	crashedAt map[string]fence.Token
	marked    map[string]fence.Token
	rebuilds  uint64 // the Guard's filter rebuilds counted so far
}

// guardAck is one acknowledged write: its operation and token. superseded
// marks an operation whose receipt was pruned and which a later write took
// again under the same ID: its receipt is that write's now.
type guardAck struct {
	op         string
	tok        fence.Token
	superseded bool
}

// guardReuseOne: one write in guardReuseOne sends again the operation ID
// of an earlier acknowledged write to its resource, as a worker that took
// a resource over does with an operation whose outcome it does not know;
// guardPruneOne: one acknowledged write in guardPruneOne prunes its
// resource, so that the Guard judges later writes, reused IDs among them,
// with pruned receipts and a rebuilt operation filter.
const guardReuseOne, guardPruneOne = 6, 12

var guardPrefix = []byte("\x00fence/")

func newGuardStore(s *Sim) *guardStore {
	gs := &guardStore{
		s: s, fs: vfs.NewCrashableMem(), rng: newRand(s.rng.Uint64()),
		acked: map[string][]guardAck{}, highest: map[string]fence.Token{}, value: map[string][]byte{}, checked: map[string]int{},
		pruned: map[string]fence.Token{}, crashedAt: map[string]fence.Token{}, marked: map[string]fence.Token{},
	}
	gs.open()
	return gs
}

func (gs *guardStore) open() {
	db, err := pebble.Open("db", &pebble.Options{FS: gs.fs, Logger: quietPebble{}, MemTableSize: 1 << 18, CacheSize: 1 << 20})
	if err != nil {
		panic(fmt.Sprintf("guarded store: open: %v", err))
	}
	g, err := fence.NewGuard(db, simRing, fence.GuardOptions{Prefix: guardPrefix, Domain: simDomain, OpIndexBytes: 256})
	if err != nil {
		panic(fmt.Sprintf("guarded store: guard: %v", err))
	}
	gs.db, gs.g, gs.rebuilds = db, g, 0
}

func (gs *guardStore) close() {
	if gs != nil && gs.db != nil {
		_ = gs.db.Close()
		gs.db = nil
	}
}

// write is cs's fenced write of its value through the Guard.
func (gs *guardStore) write(cs *critical) {
	if cs.token.Epoch == 0 {
		return
	}
	s := gs.s
	gs.ops++
	op := fmt.Sprintf("op%d", gs.ops)
	reused := -1 // the acknowledged write that holds the ID this one sends again
	if acked := gs.acked[cs.key]; len(acked) > 0 && gs.rng.IntN(guardReuseOne) == 0 {
		op = acked[gs.rng.IntN(len(acked))].op
		reused = gs.holderOf(cs.key, op)
	}
	// Kept: the Guard has the ID's receipt, so it must refuse the ID under
	// any new fence (F7); pruned, it must take it as new.
	kept := reused >= 0 && !gs.acked[cs.key][reused].tok.Less(gs.pruned[cs.key])
	val := []byte(fmt.Sprintf("%s by %s", cs.token, op))
	// The grant the home signed and the holder handed the section: a
	// re-sent Grant's, signed again, included (it must fence alike).
	_, err := gs.g.Apply(context.Background(), fence.Mutation{
		Signed: cs.signed, Resource: cs.key, Owner: string(cs.node.id), Operation: simOperation,
		OpID: op, Section: cs.token.Section, Segment: 1, Payload: val,
	}, func(b *pebble.Batch) error { return b.Set([]byte("data/"+cs.key), val, nil) })
	switch {
	case err == nil:
		s.faults["guard_write"]++
		if h, ok := gs.highest[cs.key]; ok && !h.Less(cs.token) {
			s.check.fail(invGuardOrder, "the Guard accepted %s's write to %s under %s, not above %s it acknowledged before",
				cs.node.id, cs.key, cs.token, h)
			return
		}
		if kept {
			s.check.fail(invGuardOnce, "the Guard accepted %s again on %s under %s, while its receipt under %s is kept (pruned below %s)",
				op, cs.key, cs.token, gs.acked[cs.key][reused].tok, gs.pruned[cs.key])
			return
		}
		if reused >= 0 {
			gs.acked[cs.key][reused].superseded = true
			s.faults["guard_reused_accepted"]++
			s.trace("guard took pruned %s again %s %s %s", op, cs.node.id, cs.key, cs.token)
		}
		gs.highest[cs.key], gs.value[cs.key] = cs.token, val
		gs.acked[cs.key] = append(gs.acked[cs.key], guardAck{op: op, tok: cs.token})
		if gs.rng.IntN(guardPruneOne) == 0 {
			gs.prune(cs.key, gs.marked[cs.key])
			gs.marked[cs.key] = cs.token
		}
	case errors.Is(err, fence.ErrDuplicateOp) && kept:
		s.faults["guard_duplicate_refused"]++
		s.trace("guard refused duplicate %s %s %s %s", op, cs.node.id, cs.key, cs.token)
	case errors.Is(err, fence.ErrDuplicateOp) && reused >= 0:
		s.check.fail(invGuardOnce, "the Guard refused %s on %s under %s as a duplicate, but its receipt under %s was pruned below %s: %v",
			op, cs.key, cs.token, gs.acked[cs.key][reused].tok, gs.pruned[cs.key], err)
	case errors.Is(err, fence.ErrStaleOwner):
		s.faults["guard_stale_refused"]++
		s.trace("guard refused stale %s %s %s", cs.node.id, cs.key, cs.token)
	default:
		s.check.fail(invGuardOrder, "the Guard refused %s's write to %s under %s: %v", cs.node.id, cs.key, cs.token, err)
	}
}

// crash first prunes each resource's receipts below the highest token
// acknowledged at the crash before (fence.Guard.Prune), then drops the
// store's unsynced data (some of it survives at random), reopens it from
// what is left and checks that every acknowledged write is there, its
// receipt too unless it was pruned (which the Guard must then say:
// ErrPruned, never "no receipt"), and each resource holds its highest
// acknowledged value. The Guard goes on judging writes after the prunes,
// so a Prune that lost a fence shows as G3.
func (gs *guardStore) crash(last bool) {
	s := gs.s
	s.faults["store_crash"]++
	s.trace("store crash")
	ctx := context.Background()
	for _, key := range sortedKeys(gs.acked) {
		if !gs.prune(key, gs.crashedAt[key]) {
			return
		}
	}
	for key, h := range gs.highest {
		gs.crashedAt[key] = h
	}
	// CrashClone draws once per unsynced block and directory entry, and
	// how many there are depends on when Pebble's own goroutines flushed:
	// it gets a stream of its own, so that gs.rng's later draws (and with
	// them the seed's replay) do not.
	clone := gs.fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: gs.rng.IntN(60), RNG: newRand(gs.rng.Uint64())})
	gs.close()
	gs.fs = clone
	gs.open()
	for _, key := range sortedKeys(gs.acked) {
		// Every receipt at the last crash; before it, those acknowledged
		// since the crash before (reading them all each time would cost
		// more than the rest of the seed).
		ops := gs.acked[key]
		if !last {
			ops = ops[gs.checked[key]:]
		}
		gs.checked[key] = len(gs.acked[key])
		for _, a := range ops {
			if a.superseded {
				continue // its ID's receipt is a later write's
			}
			_, err := gs.g.Receipt(ctx, key, a.op)
			switch pruned := a.tok.Less(gs.pruned[key]); {
			case pruned && !errors.Is(err, fence.ErrPruned):
				s.check.fail(invGuardLost, "after a store crash %s on %s, pruned below %s, is answered %v, not ErrPruned", a.op, key, gs.pruned[key], err)
				return
			case !pruned && err != nil:
				s.check.fail(invGuardLost, "after a store crash the receipt of %s on %s is gone: %v", a.op, key, err)
				return
			}
		}
		v, closer, err := gs.db.Get([]byte("data/" + key))
		if err != nil {
			s.check.fail(invGuardLost, "after a store crash %s has no value (%v); %s was acknowledged", key, err, gs.value[key])
			return
		}
		same := bytes.Equal(v, gs.value[key])
		got := string(v)
		_ = closer.Close()
		if !same {
			s.check.fail(invGuardLost, "after a store crash %s holds %q; the last acknowledged write was %q", key, got, gs.value[key])
			return
		}
	}
}

// holderOf is the index of the acknowledged write to key that holds op's
// receipt: the last one under that ID.
func (gs *guardStore) holderOf(key, op string) int {
	acked := gs.acked[key]
	for i := len(acked) - 1; i >= 0; i-- {
		if acked[i].op == op {
			return i
		}
	}
	return -1
}

// prune prunes key's receipts below below, a fence acknowledged earlier
// (nothing if it is zero or the key was pruned that far), and counts the
// operation filter's rebuilds that Prune does. It reports false after a
// violation.
func (gs *guardStore) prune(key string, below fence.Token) bool {
	s := gs.s
	if below.IsZero() || !gs.pruned[key].Less(below) {
		return true
	}
	ctx := context.Background()
	if _, err := gs.g.Prune(ctx, key, below); err != nil {
		s.check.fail(invGuardLost, "pruning %s below %s: %v", key, below, err)
		return false
	}
	gs.pruned[key] = below
	s.faults["guard_prune"]++
	s.trace("guard pruned %s below %s", key, below)
	if st, err := gs.g.Stats(ctx); err == nil && st.OpFilterRebuilds > gs.rebuilds {
		gs.rebuilds = st.OpFilterRebuilds
		s.faults["guard_filter_rebuild"]++
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// startGuard runs the guarded store in one seed in guardEvery: store
// crashes through the fault phase, and a last one just before the end.
func (s *Sim) startGuard() {
	if s.cfg.Seed%guardEvery != 0 {
		return
	}
	s.harsh.guard = newGuardStore(s)
	s.faults["guard"]++
	for t := 500 * time.Millisecond; simBase.Add(t).Before(s.healedAt); t += 300*time.Millisecond + time.Duration(s.rng.Int64N(int64(1700*time.Millisecond))) {
		s.at(simBase.Add(t), &event{kind: evFault, run: func() { s.harsh.guard.crash(false) }})
	}
	s.at(simBase.Add(s.cfg.Duration-time.Millisecond), &event{kind: evFault, run: func() { s.harsh.guard.crash(true) }})
}
