package fence

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// TestOpFilterFalsePositives: every key added is found (a false negative
// would let an operation apply twice, F7), at every size down to one block,
// and at the default's design load (about 9.8 bits a key) the false
// positives stay near the 1.1% DefaultOpIndexBytes promises. The first two
// sizes are overfull on purpose: they check only that nothing added is lost.
func TestOpFilterFalsePositives(t *testing.T) {
	for _, c := range []struct {
		bytes, keys int
		maxRate     float64
	}{
		{64, 40, 1},              // one block
		{256, 200, 1},            // the crash tests' size
		{64 << 10, 53_500, 0.02}, // the default's bits a key, smaller
		{DefaultOpIndexBytes, 1_700_000, 0.02},
	} {
		t.Run(fmt.Sprint(c.bytes), func(t *testing.T) {
			if c.keys > 100_000 && testing.Short() {
				t.Skip("the default size's design load")
			}
			f := newOpFilter(c.bytes)
			key := func(i int) []byte { return fmt.Appendf(nil, "res/op-%d", i) }
			for i := range c.keys {
				f.add(key(i))
			}
			for i := range c.keys {
				must.True(t, f.mayContain(key(i)), "key %d added but not found", i)
			}
			const probes = 100_000
			fp := 0
			for i := c.keys; i < c.keys+probes; i++ {
				if f.mayContain(key(i)) {
					fp++
				}
			}
			rate := float64(fp) / probes
			t.Logf("%d bytes, %d keys: %.2f%% false positives", c.bytes, c.keys, 100*rate)
			must.True(t, rate <= c.maxRate, "false-positive rate %.3f over %.3f", rate, c.maxRate)
		})
	}
}

// TestOpFilterWorthRebuilding: a rebuild pays for itself only when it at
// least halves a load that is past half the design load.
func TestOpFilterWorthRebuilding(t *testing.T) {
	for _, c := range []struct {
		keys, removed int64
		want          bool
	}{
		{0, 0, false},
		{500, 500, false}, // everything pruned, but the filter is barely loaded
		{600, 299, false}, // past half the design load, less than half pruned
		{600, 300, true},
		{2000, 999, false},
		{2000, 1000, true},
		{2000, 2500, true}, // pruned more than it took: entries of an earlier filter
	} {
		f := &opFilter{design: 1000}
		f.keys.Store(c.keys)
		f.removed.Store(c.removed)
		must.Equal(t, c.want, f.worthRebuilding(), "%d keys, %d removed", c.keys, c.removed)
	}
}

// writeOps writes n operations to res, each under its own fence (1, 1,
// first+i), so that Prune can drop them one fence at a time.
func writeOps(tb testing.TB, f *fixture, res string, first, n int) {
	tb.Helper()
	for i := range n {
		c := uint64(first + i)
		_, err := f.apply(mut(f.grant(res, "A", tok(1, 1, c)), res, "A", fmt.Sprintf("op%d", c), 1, "x"))
		must.NoError(tb, err)
	}
}

// TestOpFilterRebuildAfterPrune: once Prune has deleted most of what an
// overloaded filter holds, the filter is rebuilt from the index: it rules
// the pruned IDs out again without a read, its load drops to what the index
// keeps, and every kept ID is still found (F7). A smaller Prune leaves the
// filter as it is.
func TestOpFilterRebuildAfterPrune(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, GuardOptions{OpIndexBytes: 1024}) // designed for 835 keys
	const r = "res"
	writeOps(t, f, r, 1, 1200)
	stats := func() GuardStats {
		s, err := f.g.Stats(ctx)
		must.NoError(t, err)
		return s
	}
	must.True(t, stats().OpFilterLoad > 1.4, "1,200 keys in a filter for 835: load %.2f", stats().OpFilterLoad)

	_, err := f.g.Prune(ctx, r, tok(1, 1, 400))
	must.NoError(t, err)
	must.Equal(t, uint64(0), stats().OpFilterRebuilds, "399 of 1,200 pruned: not worth a rebuild")
	before := f.g.opFilter()

	_, err = f.g.Prune(ctx, r, tok(1, 1, 1101))
	must.NoError(t, err)
	s := stats()
	must.Equal(t, uint64(1), s.OpFilterRebuilds)
	must.True(t, f.g.opFilter() != before, "the filter was replaced")
	must.Equal(t, 100.0/float64(before.design), s.OpFilterLoad, "the rebuilt filter holds the 100 kept keys")

	maybe := func(fl *opFilter, from, to int) (n int) {
		for c := from; c <= to; c++ {
			if fl.mayContain(f.g.opKey(r, fmt.Sprintf("op%d", c))) {
				n++
			}
		}
		return n
	}
	must.Equal(t, 1100, maybe(before, 1, 1100), "the old filter answers maybe for every pruned ID")
	must.True(t, maybe(f.g.opFilter(), 1, 1100) < 20, "the rebuilt filter rules out most pruned IDs: %d of 1,100 maybe", maybe(f.g.opFilter(), 1, 1100))
	must.Equal(t, 100, maybe(f.g.opFilter(), 1101, 1200), "every kept ID is in the rebuilt filter")

	// F7 for the kept receipts, through the rebuilt filter.
	_, err = f.apply(mut(f.grant(r, "A", tok(1, 1, 1300)), r, "A", "op1150", 1, "again"))
	must.ErrorIs(t, err, ErrDuplicateOp)
	// And the filter keeps taking new keys.
	writeOps(t, f, r, 1301, 10)
	must.Equal(t, 10, maybe(f.g.opFilter(), 1301, 1310))
}

// TestOpFilterRebuildCanceled: a rebuild stopped by its context leaves the
// filter in place, and no replacement behind that writes would go on
// feeding.
func TestOpFilterRebuildCanceled(t *testing.T) {
	f := newFixture(t, GuardOptions{OpIndexBytes: 1024})
	writeOps(t, f, "res", 1, 3000) // more than one fill batch, so the fill checks ctx
	before := f.g.opFilter()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	must.ErrorIs(t, f.g.rebuildOpFilter(ctx), context.Canceled)
	must.True(t, f.g.opFilter() == before, "the filter was kept")
	must.True(t, f.g.ops.Load().next == nil, "no replacement left behind")
	must.False(t, f.g.opsRebuilding.Load())
	must.NoError(t, f.g.rebuildOpFilter(context.Background()), "a later rebuild runs")
	must.True(t, f.g.opFilter() != before)
}

// TestOpFilterRebuildBesideWriters rebuilds the filter over and over while
// writers commit new operation IDs: right after each commit, and at the
// end, the filter in place must answer maybe for the ID, since a "no" for
// an ID with a receipt would accept its operation twice (F7). The index
// keys committed while a rebuild reads the index are the ones at risk.
func TestOpFilterRebuildBesideWriters(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, GuardOptions{OpIndexBytes: 64 << 10})
	var wg sync.WaitGroup
	var lost, written atomic.Int64
	// rebuilds counts the rebuilds begun; the writers go on past perWriter
	// until minRebuilds have begun, so that the rebuilds ran beside writes
	// however the scheduler timed them (a fixed count of writes once ended
	// before 10 rebuilds did).
	var rebuilds atomic.Int64
	const writers, perWriter, minRebuilds = 4, 400, 10
	for w := range writers {
		wg.Go(func() {
			r := fmt.Sprintf("r%d", w)
			for c := uint64(0); c < perWriter || rebuilds.Load() < minRebuilds; c++ {
				op := fmt.Sprintf("w%d-%d", w, c)
				if _, err := f.apply(mut(f.grant(r, "A", tok(1, 1, c+1)), r, "A", op, 1, op)); err != nil {
					t.Errorf("%s: %v", op, err)
					return
				}
				written.Add(1)
				if !f.g.opFilter().mayContain(f.g.opKey(r, op)) {
					lost.Add(1)
				}
			}
		})
	}
	done := make(chan struct{})
	rebuilt := make(chan struct{})
	go func() {
		defer close(rebuilt)
		for {
			select {
			case <-done:
				return
			default:
			}
			rebuilds.Add(1)
			if err := f.g.rebuildOpFilter(ctx); err != nil {
				t.Errorf("rebuild: %v", err)
			}
		}
	}()
	wg.Wait()
	close(done)
	<-rebuilt
	must.Equal(t, int64(0), lost.Load(), "committed IDs the filter in place ruled out")
	lower, upper := f.g.kindBounds(kindOp)
	keys := 0
	must.NoError(t, f.g.scan(ctx, lower, upper, func(key, _ []byte) error {
		keys++
		must.True(t, f.g.opFilter().mayContain(key), "index key %q not in the filter", key)
		return nil
	}))
	must.Equal(t, int(written.Load()), keys)
	t.Logf("%d rebuilds beside %d writes", rebuilds.Load(), keys)
}
