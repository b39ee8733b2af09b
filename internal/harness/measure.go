package harness

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/homelock/homelock"
	clustertest "github.com/homelock/homelock/cluster_test"
	"github.com/homelock/homelock/fence"
)

func newHist() *hdr.Histogram { return hdr.New(1, int64(60*time.Second), 3) }

// repeatLock: lock+unlock of a key whose delegation node 0 already holds,
// timed one by one for the latency, then counted without the clock for the
// throughput, of one goroutine and of parallel goroutines each on its own
// key (the repeat path should scale across cores).
func (c *cluster) repeatLock(ctx context.Context, r *Report, d time.Duration, parallel int) error {
	n := c.nodes[0]
	key := "repeat"
	h, err := n.Lock(ctx, key)
	if err != nil {
		return err
	}
	_ = h.Unlock()
	hist := newHist()
	before, _ := c.delegationMsgs()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if err := ctx.Err(); err != nil {
			return err
		}
		for range 1024 {
			t0 := time.Now()
			h, err := n.Lock(ctx, key)
			if err != nil {
				return err
			}
			_ = h.Unlock()
			_ = hist.RecordValue(max(1, time.Since(t0).Nanoseconds()))
		}
	}
	after, _ := c.delegationMsgs()
	r.record("repeat_lock_ns_p50", float64(hist.ValueAtQuantile(50)))
	r.record("stopwatch_ns_p50", stopwatchP50())
	r.record("repeat_lock_ns_p99", float64(hist.ValueAtQuantile(99)))
	r.record("repeat_lock_msgs", float64(after-before))
	r.recordLatency("repeat lock+unlock", hist)

	one, err := repeatOps(ctx, n, []string{key}, d/2)
	if err != nil {
		return err
	}
	keys := make([]string, parallel)
	for i := range keys {
		keys[i] = fmt.Sprintf("repeat-%d", i)
	}
	many, err := repeatOps(ctx, n, keys, d/2)
	if err != nil {
		return err
	}
	r.record("repeat_lock_ops_per_s", one)
	r.record("repeat_lock_parallel_ops_per_s", many)
	r.record("repeat_lock_scaling", many/one)
	return nil
}

// stopwatchP50 is what the repeat lock's stopwatch (time.Now, then
// time.Since) reads on an empty interval. It is measured after the locks,
// in a function of its own: between their batches it moved their p50 up by
// 10 to 20 ns, and so did its loop inlined beside theirs.
//
//go:noinline
func stopwatchP50() float64 {
	empty := newHist()
	for range 1 << 16 {
		t0 := time.Now()
		_ = empty.RecordValue(max(1, time.Since(t0).Nanoseconds()))
	}
	return float64(empty.ValueAtQuantile(50))
}

// repeatOps is the repeat locks per second of one goroutine per key, all on
// node n, for d: each key's delegation is taken first, outside the count.
func repeatOps(ctx context.Context, n *homelock.Node, keys []string, d time.Duration) (float64, error) {
	for _, k := range keys {
		h, err := n.Lock(ctx, k)
		if err != nil {
			return 0, err
		}
		_ = h.Unlock()
	}
	var ops atomic.Uint64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for _, k := range keys {
		wg.Go(func() {
			done := uint64(0)
			defer func() { ops.Add(done) }()
			for time.Now().Before(end) && ctx.Err() == nil {
				for range 256 {
					h, err := n.Lock(ctx, k)
					if err != nil {
						firstErr.CompareAndSwap(nil, err)
						return
					}
					_ = h.Unlock()
					done++
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err, ok := firstErr.Load().(error); ok {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return float64(ops.Load()) / elapsed.Seconds(), nil
}

// firstLock: uncontended acquisitions of fresh keys from node 0, with the
// home on another node and on node 0 itself; also the wire cost of one. Each
// remote acquisition follows a plain gRPC unary round trip on the same
// loopback, so that the two see the same load on a shared machine.
func (c *cluster) firstLock(ctx context.Context, r *Report, samples int) error {
	ping, err := newUnaryPing(ctx)
	if err != nil {
		return fmt.Errorf("gRPC round trip: %w", err)
	}
	defer ping.close()
	ring := c.ring(0)
	self := c.nodes[0].ID()
	next := 0
	rtt := newHist()
	for _, remote := range []bool{true, false} {
		hist := newHist()
		msgs0, bytes0 := c.delegationMsgs()
		for range samples {
			if remote {
				d, err := ping.roundTrip(ctx)
				if err != nil {
					return fmt.Errorf("gRPC round trip: %w", err)
				}
				_ = rtt.RecordValue(max(1, d.Nanoseconds()))
			}
			key := c.keyHomedAt(ring, self, remote, "first", &next)
			t0 := time.Now()
			h, err := c.nodes[0].Lock(ctx, key)
			if err != nil {
				return err
			}
			_ = hist.RecordValue(max(1, time.Since(t0).Nanoseconds()))
			_ = h.Unlock()
		}
		msgs1, bytes1 := c.delegationMsgs()
		if remote {
			r.record("first_lock_remote_us_p50", us(hist.ValueAtQuantile(50)))
			r.record("first_lock_remote_us_p99", us(hist.ValueAtQuantile(99)))
			// The delegations lapse later with one Release each, outside
			// this window: count it, so a lock's whole cost is here.
			r.record("msgs_per_acquisition", float64(msgs1-msgs0)/float64(samples)+1)
			r.record("bytes_per_acquisition", float64(bytes1-bytes0)/float64(samples))
			r.recordLatency("first lock, remote home", hist)
		} else {
			r.record("first_lock_local_us_p50", us(hist.ValueAtQuantile(50)))
			r.recordLatency("first lock, local home", hist)
		}
	}
	r.record("grpc_unary_us_p50", us(rtt.ValueAtQuantile(50)))
	r.recordLatency("gRPC unary round trip", rtt)

	// The same round trip on one scheduler thread: what is left is the
	// work, and the difference what waking an idle core costs on this
	// machine (docs/design.md, "What the hop costs on this VM").
	one := newHist()
	procs := runtime.GOMAXPROCS(1)
	defer restoreProcs(procs)
	for range samples {
		d, err := ping.roundTrip(ctx)
		if err != nil {
			return fmt.Errorf("gRPC round trip: %w", err)
		}
		_ = one.RecordValue(max(1, d.Nanoseconds()))
	}
	r.record("grpc_unary_one_proc_us_p50", us(one.ValueAtQuantile(50)))
	return nil
}

// restoreProcs undoes runtime.GOMAXPROCS(1): setting it turns off the
// runtime's own updates (to a changed CPU quota) for the rest of the run,
// so it goes back to them unless the user fixed GOMAXPROCS.
func restoreProcs(procs int) {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.SetDefaultGOMAXPROCS()
		return
	}
	runtime.GOMAXPROCS(procs)
}

// us is a histogram's nanoseconds in microseconds.
func us(ns int64) float64 { return float64(ns) / 1e3 }

// increment reads the counter under h and writes it plus one.
func increment(ctx context.Context, kv *clustertest.KV, h homelock.Handle, key string) error {
	v, err := counter(kv, key)
	if err != nil {
		return err
	}
	_, err = kv.Put(ctx, h, key, binary.BigEndian.AppendUint64(nil, v+1))
	return err
}

// counter is key's counter on kv's replica (0 before its first increment).
func counter(kv *clustertest.KV, key string) (uint64, error) {
	b, _, _, err := kv.Get(key)
	if err != nil || len(b) != 8 {
		return 0, err
	}
	return binary.BigEndian.Uint64(b), nil
}

// settledCounter waits until key's counter on kv reads want (replication
// may trail the writes), or deadline or ctx, and returns what it last read.
func settledCounter(ctx context.Context, kv *clustertest.KV, key string, want uint64, deadline time.Time) uint64 {
	for {
		got, _ := counter(kv, key)
		if got == want || ctx.Err() != nil || time.Now().After(deadline) {
			return got
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// hotKey: workers on every node do read-increment-write of one counter.
func (c *cluster) hotKey(ctx context.Context, r *Report, key string, d time.Duration, workers int) error {
	hist := newHist()
	var mu sync.Mutex
	perNode := make([]uint64, len(c.nodes))
	tokens := map[fence.Token]span{}
	var acked atomic.Uint64
	msgs0, bytes0 := c.delegationMsgs()
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for i := range c.nodes {
		for range workers {
			wg.Go(func() {
				for time.Now().Before(end) {
					t0 := time.Now()
					h, err := c.nodes[i].Lock(ctx, key)
					if err != nil {
						firstErr.CompareAndSwap(nil, err)
						return
					}
					admitted := time.Now()
					err = increment(h.Context(), c.kvs[i], h, key)
					_ = h.Unlock()
					unlocked := time.Now()
					if err == nil {
						acked.Add(1)
					}
					mu.Lock()
					if err == nil {
						perNode[i]++
						_ = hist.RecordValue(max(1, admitted.Sub(t0).Nanoseconds()))
					}
					// One span per grant: the sections a grant admits share
					// its token but for the section number.
					grant := h.Token()
					grant.Section = 0
					sp := tokens[grant].add(admitted, unlocked)
					sp.node = i
					tokens[grant] = sp
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if err, ok := firstErr.Load().(error); ok {
		return fmt.Errorf("hot key: %w", err)
	}
	msgs1, bytes1 := c.delegationMsgs()
	grants := float64(len(tokens))
	r.record("hot_key_handoffs_per_s", grants/d.Seconds())
	r.record("hot_key_updates_per_s", float64(acked.Load())/d.Seconds())
	r.record("hot_key_wait_us_p50", us(hist.ValueAtQuantile(50)))
	r.record("hot_key_wait_us_p99", us(hist.ValueAtQuantile(99)))
	r.recordLatency("hot key wait", hist)
	parts := handoffParts(tokens, c.homeIndex(key))
	r.record("hot_key_hold_us_p50", parts.holdUs)
	r.record("hot_key_gap_us_p50", parts.gapUs)
	r.record("hot_key_gap_one_hop_us_p50", parts.oneHopUs)
	r.record("hot_key_gap_two_hops_us_p50", parts.twoHopsUs)
	if grants > 0 {
		r.record("msgs_per_handoff", float64(msgs1-msgs0)/grants)
		r.record("bytes_per_handoff", float64(bytes1-bytes0)/grants)
	}
	var sum, sq float64
	for _, v := range perNode {
		sum += float64(v)
		sq += float64(v) * float64(v)
	}
	if sq > 0 {
		r.record("hot_key_fairness_jain", sum*sum/(float64(len(perNode))*sq))
	}
	// Lost updates: every replica must end at the acknowledged count.
	want := acked.Load()
	deadline := time.Now().Add(10 * time.Second)
	lost := uint64(0)
	for _, kv := range c.kvs {
		got := settledCounter(ctx, kv, key, want, deadline)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		lost = max(lost, diff(want, got))
	}
	r.record("hot_key_lost_updates", float64(lost))
	return nil
}

// span is when a grant (one token) was in use on its holder, node: from its
// first admission to its last unlock.
type span struct {
	first, last time.Time
	node        int
}

func (s span) add(admitted, unlocked time.Time) span {
	if s.first.IsZero() || admitted.Before(s.first) {
		s.first = admitted
	}
	if unlocked.After(s.last) {
		s.last = unlocked
	}
	return s
}

// handoff is a handoff's two serial parts, as p50s in µs: how long a grant
// is in use (its critical sections: the store's read and fenced write) and
// the gap from its last unlock to the next grant's first admission
// (release, grant, and the successor's wait for the store's barrier).
// Handoffs per second are bounded by one over their sum. The gap is also
// split by the network hops the handoff took: one when the home is the old
// or the new holder (A → B), two when it is neither (A → H → B).
type handoff struct {
	holdUs, gapUs, oneHopUs, twoHopsUs float64
}

// handoffParts measures the handoffs between the grants in tokens, in token
// order; home is the index of the key's home node.
func handoffParts(tokens map[fence.Token]span, home int) handoff {
	order := make([]fence.Token, 0, len(tokens))
	for t := range tokens {
		order = append(order, t)
	}
	slices.SortFunc(order, fence.Token.Compare)
	hold, gap, oneHop, twoHops := newHist(), newHist(), newHist(), newHist()
	for i, t := range order {
		s := tokens[t]
		_ = hold.RecordValue(max(1, s.last.Sub(s.first).Microseconds()))
		if i == 0 {
			continue
		}
		prev := tokens[order[i-1]]
		g := s.first.Sub(prev.last)
		if g <= 0 {
			continue
		}
		us := max(1, g.Microseconds())
		_ = gap.RecordValue(us)
		switch {
		case prev.node == s.node:
		case prev.node == home || s.node == home:
			_ = oneHop.RecordValue(us)
		default:
			_ = twoHops.RecordValue(us)
		}
	}
	return handoff{
		holdUs: float64(hold.ValueAtQuantile(50)), gapUs: float64(gap.ValueAtQuantile(50)),
		oneHopUs: float64(oneHop.ValueAtQuantile(50)), twoHopsUs: float64(twoHops.ValueAtQuantile(50)),
	}
}

func diff(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return b - a
}

// manyKeys: the same read-increment-write over keys chosen at random. With
// write false the workers only lock and unlock, which measures the lock
// without the store. It returns the operations per second and their latency.
func (c *cluster) manyKeys(ctx context.Context, d time.Duration, workers, keys int, write bool) (float64, *hdr.Histogram, error) {
	hist := newHist()
	var mu sync.Mutex
	var ops atomic.Uint64
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for i := range c.nodes {
		for w := range workers {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(i), uint64(w)))
				for time.Now().Before(end) {
					key := fmt.Sprintf("many-%d", rng.IntN(keys))
					t0 := time.Now()
					h, err := c.nodes[i].Lock(ctx, key)
					if err != nil {
						firstErr.CompareAndSwap(nil, err)
						return
					}
					if write {
						err = increment(h.Context(), c.kvs[i], h, key)
					}
					_ = h.Unlock()
					if err == nil {
						ops.Add(1)
						mu.Lock()
						_ = hist.RecordValue(max(1, time.Since(t0).Nanoseconds()))
						mu.Unlock()
					}
				}
			})
		}
	}
	wg.Wait()
	if err, ok := firstErr.Load().(error); ok {
		return 0, nil, fmt.Errorf("many keys: %w", err)
	}
	return float64(ops.Load()) / d.Seconds(), hist, nil
}

// storeWrites measures a store's plain write throughput on its own Pebble
// (unsynced, so that CPU, not the disk, is what homelock could take away):
// the writes per second of each of storeWindows windows of at most d/
// storeWindows and storeMaxWrites/storeWindows writes. The sample's directory
// is removed when it ends.
//
// Its footprint is bounded however fast the machine: the write cap bounds
// the memtables and the WAL to some 50 MB each, and the WAL is not
// preallocated. Pebble sizes each WAL to 110% of MemTableSize and starts a
// new one at every memtable rotation (the memtable grows from 256 KiB by
// doubling), and on tmpfs a preallocation is RAM: with a 512 MiB memtable one
// two-second sample held 5-6 GB of /dev/shm. The rotations' small flushes
// land in the first windows; the median window keeps them out.
func storeWrites(ctx context.Context, dir string, d time.Duration) ([]float64, error) {
	defer os.RemoveAll(dir)
	db, err := pebble.Open(dir, &pebble.Options{Logger: quiet{}, MemTableSize: storeMemTable, FS: noPrealloc{vfs.Default}})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	val := make([]byte, 64)
	n := 0
	window, perWindow := d/storeWindows, storeMaxWrites/storeWindows
	rates := make([]float64, 0, storeWindows)
	for range storeWindows {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		start, done := time.Now(), 0
		for done < perWindow && time.Since(start) < window {
			for range 256 {
				k := binary.BigEndian.AppendUint64([]byte("w"), uint64(n%100000))
				if err := db.Set(k, val, pebble.NoSync); err != nil {
					return nil, err
				}
				n++
				done++
			}
		}
		rates = append(rates, float64(done)/time.Since(start).Seconds())
	}
	return rates, nil
}

const (
	storeWindows   = 8
	storeMaxWrites = 400_000
	// storeMemTable is more than the cap's writes fill, so that no
	// memtable reaches its limit in a sample.
	storeMemTable = 64 << 20
)

// noPrealloc is a file system whose files ignore Pebble's preallocation.
type noPrealloc struct{ vfs.FS }

func (fs noPrealloc) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	if err != nil {
		return nil, err
	}
	return noPreallocFile{f}, nil
}

func (fs noPrealloc) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	if err != nil {
		return nil, err
	}
	return noPreallocFile{f}, nil
}

type noPreallocFile struct{ vfs.File }

func (noPreallocFile) Preallocate(offset, length int64) error { return nil }

// median of xs (-1 for none).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return -1
	}
	xs = slices.Sorted(slices.Values(xs))
	if n := len(xs); n%2 == 0 {
		return (xs[n/2-1] + xs[n/2]) / 2
	}
	return xs[len(xs)/2]
}

type quiet struct{}

func (quiet) Infof(string, ...any)  {}
func (quiet) Errorf(string, ...any) {}
func (quiet) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

// heapInUse is the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
