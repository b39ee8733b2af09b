package harness

import (
	"context"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"
)

// BenchmarkIdleDelegations runs the harness's memory measure alone (the
// full harness takes a minute): b.N delegations held idle on one node, whose
// home is that node too, reported as live heap bytes per delegation. Run it
// with -benchtime=200000x; HOMELOCK_IDLE_HEAP=FILE also writes a heap
// profile taken while the delegations are still held (with
// -memprofilerate=512 or so, for a sample of every small allocation).
func BenchmarkIdleDelegations(b *testing.B) {
	var r Report
	n, err := holdIdle(context.Background(), b.TempDir(), b.N, &r)
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
	b.ReportMetric(r.BytesPerIdleDelegation, "B/delegation")
	b.ReportMetric(0, "ns/op")
}
