package clustertest

import (
	"fmt"
	"syscall"
	"testing"
	"time"
)

// cpuTime is this process's user and system CPU time: steadier than wall
// time on a shared machine.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkGuardSeed measures what the guarded store costs a seed that
// runs it: the same seeds with it (on) and without (off).
func BenchmarkGuardSeed(b *testing.B) {
	for _, on := range []bool{true, false} {
		b.Run(fmt.Sprintf("guard=%v", on), func(b *testing.B) {
			defer func(e uint64) { guardEvery = e }(guardEvery)
			if !on {
				guardEvery = 1 << 62
			}
			b.ReportAllocs()
			cpu := cpuTime()
			for i := 0; i < b.N; i++ {
				Run(DefaultSimConfig(uint64(8 * (1 + i%40))))
			}
			b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}
