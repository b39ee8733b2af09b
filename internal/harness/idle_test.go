package harness

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/internal/leakcheck"
)

// BenchmarkIdleDelegations runs the harness's memory measure alone (the
// full harness takes a minute): b.N delegations held idle by one node for
// keys homed at another, reported as live heap bytes per delegation on
// each side. Run it with -benchtime=1000000x, the harness's count (the
// tables double, so the figure moves a little with the count);
// HOMELOCK_IDLE_HEAP=FILE also writes a heap profile taken while the
// delegations are still held (with -memprofilerate=512 or so, for a sample
// of every small allocation).
func BenchmarkIdleDelegations(b *testing.B) {
	b.Run("unsigned", func(b *testing.B) { benchIdle(b, nil) })
	b.Run("signed", func(b *testing.B) {
		// A deployment signs its grants: the signed lockGrant.v1 is kept
		// by the home and the holder both.
		ring := fence.NewKeyRing()
		if err := ring.Add("bench-1", make([]byte, 32)); err != nil {
			b.Fatal(err)
		}
		benchIdle(b, ring)
	})
}

func benchIdle(b *testing.B, ring *fence.KeyRing) {
	profile := ""
	if b.N > 1 {
		profile = os.Getenv("HOMELOCK_IDLE_HEAP")
	}
	m, err := measureIdle(context.Background(), b.TempDir(), b.N, ring, profile)
	if err != nil {
		b.Fatal(err)
	}
	if m.held != b.N {
		b.Fatalf("held %d delegations of %d", m.held, b.N)
	}
	b.ReportMetric(m.holder, "holder-B/delegation")
	b.ReportMetric(m.home, "home-B/delegation")
	b.ReportMetric(0, "ns/op")
}

// TestMeasureIdle: the split finds each side's share (an entry, a key, a
// table slot and a timer on each: well over 64 bytes, well under 400, at
// any count), holds every delegation, and leaves nothing behind.
func TestMeasureIdle(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two pairs of nodes")
	}
	defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
	dir := filepath.Join(t.TempDir(), "idle")
	const count = 20000
	m, err := measureIdle(context.Background(), dir, count, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("holder %.1f B, home %.1f B per delegation", m.holder, m.home)
	if m.held != count {
		t.Errorf("held %d delegations of %d", m.held, count)
	}
	for side, v := range map[string]float64{"holder": m.holder, "home": m.home} {
		if v < 64 || v > 400 {
			t.Errorf("%s: %.1f B per delegation, outside 64–400", side, v)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the measure left its directory behind: %v", err)
	}
}
