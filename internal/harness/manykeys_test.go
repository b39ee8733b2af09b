//go:build unix

package harness

import (
	"testing"
	"time"
)

// BenchmarkManyKeys runs the harness's many-keys phase alone, lock only
// (lock) and with the example store's write (write): a 3-node cluster in
// the harness's work directory, 4 workers per node locking and unlocking
// keys drawn from 64 for 3s per iteration; run it with -benchtime=Nx. It
// reports operations per second and the process's CPU time (all three
// nodes) per operation, the steadier of the two on a shared machine, and
// the delegation messages per operation.
func BenchmarkManyKeys(b *testing.B) {
	b.Run("lock", func(b *testing.B) { benchManyKeys(b, false) })
	b.Run("write", func(b *testing.B) { benchManyKeys(b, true) })
}

func benchManyKeys(b *testing.B, write bool) {
	const d, workers, keys = 3 * time.Second, 4, 64
	ctx, c := benchCluster(b)
	msgs0, _ := c.delegationMsgs()
	frames0 := c.sentByKind()["frames"]
	cpu0 := cpuTime(b)
	var ops float64
	b.ResetTimer()
	for range b.N {
		perS, _, err := c.manyKeys(ctx, d, workers, keys, write)
		if err != nil {
			b.Fatal(err)
		}
		ops += perS * d.Seconds()
	}
	b.StopTimer()
	cpu1 := cpuTime(b)
	msgs1, _ := c.delegationMsgs()
	frames1 := c.sentByKind()["frames"]
	b.ReportMetric(ops/(d.Seconds()*float64(b.N)), "ops/s")
	if ops > 0 {
		b.ReportMetric(float64((cpu1-cpu0).Microseconds())/ops, "cpu-µs/op")
		b.ReportMetric(float64(msgs1-msgs0)/ops, "msgs/op")
		b.ReportMetric(float64(frames1-frames0)/ops, "frames/op")
	}
}
