package homelock

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/homelock/homelock/msg"
)

// BenchmarkRepeatLock is the fast path: Lock and Unlock of a key whose
// delegation this node holds, with no message at all.
func BenchmarkRepeatLock(b *testing.B) {
	c := newCluster(b, 1, func(cfg *Config) { cfg.MaxLease = 2 * cfg.MaxLease })
	n := c.nodes[0]
	c.waitAvailable()
	ctx := context.Background()
	h, err := n.Lock(ctx, "hot")
	if err != nil {
		b.Fatal(err)
	}
	_ = h.Unlock()
	before := n.Stats()
	b.ReportAllocs()
	b.ResetTimer()
	slow := 0
	for b.Loop() {
		h, err := n.Lock(ctx, "hot")
		if err != nil {
			b.Fatal(err)
		}
		if h.Unlock() != nil {
			b.Fatal("unlock")
		}
	}
	b.StopTimer()
	after := n.Stats()
	slow = int(after.Admissions-before.Admissions) - int(after.LocalFast-before.LocalFast)
	b.ReportMetric(float64(after.Sent.Msgs-before.Sent.Msgs)/float64(b.N), "msgs/op")
	b.ReportMetric(float64(slow)/float64(b.N), "slow/op")
}

// BenchmarkRepeatLockParallel is the fast path from 8 goroutines, each on
// a key of its own whose delegation this node holds. Against
// BenchmarkRepeatLock's ns/op it shows whether locks on distinct keys scale
// across cores (ns/op here is wall time per op over all goroutines).
func BenchmarkRepeatLockParallel(b *testing.B) {
	const goroutines = 8
	c := newCluster(b, 1, func(cfg *Config) { cfg.MaxLease = 2 * cfg.MaxLease })
	n := c.nodes[0]
	c.waitAvailable()
	ctx := context.Background()
	keys := make([]string, goroutines*4)
	for i := range keys {
		keys[i] = fmt.Sprintf("hot-%d", i)
		h, err := n.Lock(ctx, keys[i])
		if err != nil {
			b.Fatal(err)
		}
		_ = h.Unlock()
	}
	before := n.Stats()
	var next atomic.Int32
	b.SetParallelism((goroutines + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		key := keys[int(next.Add(1)-1)%len(keys)]
		for pb.Next() {
			h, err := n.Lock(ctx, key)
			if err != nil {
				b.Error(err)
				return
			}
			if h.Unlock() != nil {
				b.Error("unlock")
				return
			}
		}
	})
	b.StopTimer()
	after := n.Stats()
	slow := int(after.Admissions-before.Admissions) - int(after.LocalFast-before.LocalFast)
	b.ReportMetric(float64(after.Sent.Msgs-before.Sent.Msgs)/float64(b.N), "msgs/op")
	b.ReportMetric(float64(slow)/float64(b.N), "slow/op")
}

// BenchmarkRemoteLock acquires fresh keys homed on another node: one
// Acquire and one Grant per op over loopback gRPC (and a Release later).
func BenchmarkRemoteLock(b *testing.B) {
	c := newCluster(b, 3, nil)
	c.waitAvailable()
	n := c.nodes[0]
	ctx := context.Background()
	// Fresh keys whose home is not node 0 (a ring lookup per candidate is
	// noise next to the round trip).
	next := 0
	freshKey := func() string {
		for {
			next++
			k := fmt.Sprintf("remote-%d", next)
			n.mu.Lock()
			local := n.core.Home().IsHome(k)
			n.mu.Unlock()
			if !local {
				return k
			}
		}
	}
	before := n.Stats()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		h, err := n.Lock(ctx, freshKey())
		if err != nil {
			b.Fatal(err)
		}
		_ = h.Unlock()
	}
	b.StopTimer()
	after := n.Stats()
	acq := msg.KindAcquire.String()
	b.ReportMetric(float64(after.ByKind[acq].Sent.Msgs-before.ByKind[acq].Sent.Msgs)/float64(b.N), "acquires/op")
}
