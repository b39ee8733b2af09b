package localstore

import (
	"testing"

	"github.com/homelock/homelock/epoch"
)

// Both benchmarks run on a real directory: their cost is the fsync, which is
// the latency every promise, acceptance and restart pays.

func BenchmarkCommit(b *testing.B) {
	s, err := Open(b.TempDir(), Options{NodeID: "n1", ClusterID: "c1"})
	noErr(b, err)
	defer s.Close()
	rec := acceptance(1, 1)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		rec.Instance = uint64(i%64 + 1)
		if err := s.Commit(Writes{Acceptor: []epoch.AcceptorRecord{rec}}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBumpIncarnation(b *testing.B) {
	s, err := Open(b.TempDir(), Options{NodeID: "n1", ClusterID: "c1"})
	noErr(b, err)
	defer s.Close()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.BumpIncarnation(); err != nil {
			b.Fatal(err)
		}
	}
}
