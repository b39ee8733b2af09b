package harness

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/homelock/homelock/fence"
)

func TestHandoffParts(t *testing.T) {
	at := func(us int) time.Time { return time.Unix(0, 0).Add(time.Duration(us) * time.Microsecond) }
	tok := func(c uint64) fence.Token { return fence.Token{Epoch: 1, Incarnation: 1, Counter: c} }
	on := func(node, first, last int) span { return span{first: at(first), last: at(last), node: node} }
	const home = 0
	for _, tc := range []struct {
		name  string
		spans map[fence.Token]span
		want  handoff
	}{
		{"one grant", map[fence.Token]span{tok(1): on(1, 0, 100)}, handoff{holdUs: 100}},
		{
			// Grants in token order, not map order: 1 [0,100] on the
			// home, 2 [150,250] on node 1, 3 [400,500] on node 2; gaps
			// 50 (home → 1: one hop) and 150 (1 → 2: two hops).
			"gaps follow token order",
			map[fence.Token]span{tok(3): on(2, 400, 500), tok(1): on(home, 0, 100), tok(2): on(1, 150, 250)},
			handoff{holdUs: 100, gapUs: 50, oneHopUs: 50, twoHopsUs: 150},
		},
		{
			// Two critical sections under one grant count as one span.
			"a grant with two critical sections",
			map[fence.Token]span{tok(1): span{node: 1}.add(at(0), at(40)).add(at(50), at(300)), tok(2): on(home, 310, 320)},
			handoff{holdUs: 10, gapUs: 10, oneHopUs: 10}, // holds {300, 10}: the p50 of two values is the lower
		},
		{
			// A grant back to the same node is neither: no hop.
			"the same node again",
			map[fence.Token]span{tok(1): on(2, 0, 10), tok(2): on(2, 30, 40), tok(3): on(1, 100, 110)},
			handoff{holdUs: 10, gapUs: 20, twoHopsUs: 60},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := handoffParts(tc.spans, home); got != tc.want {
				t.Errorf("handoffParts = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{nil, -1}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// The one-thread round trip puts GOMAXPROCS back as it found it.
func TestRestoreProcs(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	restoreProcs(runtime.GOMAXPROCS(1))
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Fatalf("GOMAXPROCS %d after restoring, was %d", got, before)
	}
}

// idleCPU reports the process's CPU per second of its window: a goroutine
// spinning through the whole window shows as the share of a core it got
// (checked against the process's CPU over a slightly longer window, since
// a loaded machine, as in CI beside other test binaries, gives it less than
// a core: 427 ms/s once), and a window with nothing running as a small
// fraction of one.
func TestIdleCPU(t *testing.T) {
	e := &env{o: Options{Duration: 300 * time.Millisecond}, r: newReport()}
	require.NoError(t, idleCPU(context.Background(), e))
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() { // spin: one core busy for the window
		}
	}()
	c0, ok := processCPU()
	t0 := time.Now()
	err := idleCPU(context.Background(), e)
	c1, _ := processCPU()
	spun := float64(c1-c0) / float64(time.Millisecond) / time.Since(t0).Seconds()
	stop.Store(true)
	<-done
	require.NoError(t, err)
	got := e.r.runs["idle_cpu_ms_per_s"]
	require.Len(t, got, 2)
	require.Less(t, got[0], 300.0, "an idle window")
	if ok {
		require.Greater(t, got[1], 0.7*spun, "a window with one core spinning: the process used %.0f ms/s around it", spun)
	}
	require.Greater(t, got[1], got[0]+100, "a window with one core spinning, against the idle one")
	require.Less(t, got[1], 2100.0, "a window with one core spinning")
}
