package harness

import (
	"context"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"

	"github.com/homelock/homelock/fence"
)

// BenchmarkIdleDelegations runs the harness's memory measure alone (the
// full harness takes a minute): b.N delegations held idle on one node, whose
// home is that node too, reported as live heap bytes per delegation. Run it
// with -benchtime=1000000x, the harness's count (the tables double, so the
// figure moves a little with the count); HOMELOCK_IDLE_HEAP=FILE also
// writes a heap profile taken while the delegations are still held (with
// -memprofilerate=512 or so, for a sample of every small allocation).
func BenchmarkIdleDelegations(b *testing.B) {
	b.Run("unsigned", func(b *testing.B) { benchIdle(b, nil) })
	b.Run("signed", func(b *testing.B) {
		// A deployment signs its grants: the signed lockGrant.v1 is kept
		// by the home and the holder both (one copy in this process).
		ring := fence.NewKeyRing()
		if err := ring.Add("bench-1", make([]byte, 32)); err != nil {
			b.Fatal(err)
		}
		benchIdle(b, ring)
	})
}

func benchIdle(b *testing.B, ring *fence.KeyRing) {
	n, idle, err := holdIdle(context.Background(), b.TempDir(), b.N, ring)
	if n != nil {
		defer n.Close(context.Background())
	}
	if err != nil {
		b.Fatal(err)
	}
	if path := os.Getenv("HOMELOCK_IDLE_HEAP"); path != "" && b.N > 1 {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
	b.ReportMetric(idle.bytesPer, "B/delegation")
	b.ReportMetric(0, "ns/op")
}
