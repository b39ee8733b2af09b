package transport

import (
	"errors"
	"testing"
	"time"

	"github.com/homelock/homelock/msg"
	"github.com/homelock/homelock/transport/pb"
)

// FuzzDecodeMeta: a peer's memberlist metadata is untrusted input. DecodeMeta
// never panics, refuses with ErrBadMeta, and what it accepts is in bounds and
// survives its own encoding unchanged (a v2 encoding of it decodes to it).
func FuzzDecodeMeta(f *testing.F) {
	for _, m := range []Meta{
		{NodeID: "n1", StoreID: 7, GRPCAddr: "127.0.0.1:7946", Version: 2},
		{NodeID: "node-1", StoreID: 1<<64 - 1, GRPCAddr: "10.1.2.3:7000", Version: 1<<32 - 1},
		{NodeID: "n2", StoreID: 9, GRPCAddr: "[::1]:7000", Version: 3,
			Timings: msg.Timings{EpochLease: 6 * time.Second, MaxLease: 5 * time.Second, Skew: 250 * time.Millisecond, MaxDrift: 0.01}},
	} {
		b, err := EncodeMeta(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(append(append([]byte{3}, b[1:]...), 0xde, 0xad)) // a newer format
	}
	f.Add([]byte{1, 0x80, 0x00, 1, 1, 'n', 0}) // a StoreID in a longer varint than needed
	f.Add([]byte{1, 7, 2, 2, 'n', '1', 0})     // an earlier release's v1 meta
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMeta(b)
		if err != nil {
			if !errors.Is(err, ErrBadMeta) {
				t.Fatalf("DecodeMeta(%x): %v, not ErrBadMeta", b, err)
			}
			return
		}
		if len(m.NodeID) == 0 || len(m.NodeID) > pb.MaxIDLen || len(m.GRPCAddr) > pb.MaxAddrLen {
			t.Fatalf("DecodeMeta(%x) accepted out of bounds: %+v", b, m)
		}
		again, err := EncodeMeta(m)
		if err != nil {
			t.Fatalf("DecodeMeta(%x) accepted %+v, which EncodeMeta refuses: %v", b, m, err)
		}
		if back, err := DecodeMeta(again); err != nil || back != m {
			t.Fatalf("%+v encoded as %x decodes to %+v, %v", m, again, back, err)
		}
	})
}
