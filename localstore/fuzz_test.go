package localstore

import (
	"bytes"
	"testing"

	"github.com/homelock/homelock/msg"
)

// The fuzz targets check, for arbitrary bytes, that a decoder never panics
// and that whatever it accepts re-encodes to exactly the same bytes: the
// encoding is canonical, so decode and encode are inverse on every value the
// store can hold. Run one with, for example:
//
//	go test ./localstore -run '^$' -fuzz FuzzDecodeAcceptor -fuzztime 30s

func FuzzDecodeIdentity(f *testing.F) {
	f.Add(encodeIdentity(Identity{"n1", 42, "c1"}))
	f.Add(encodeIdentity(Identity{"ñ", 1<<64 - 1, "🔒"}))
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := decodeIdentity(b)
		if err != nil {
			return
		}
		if re := encodeIdentity(id); !bytes.Equal(re, b) {
			t.Fatalf("decoded %+v re-encodes to %x, input %x", id, re, b)
		}
	})
}

func FuzzDecodeIncarnation(f *testing.F) {
	f.Add(encodeIncarnation(1))
	f.Add(encodeIncarnation(300))
	f.Fuzz(func(t *testing.T, b []byte) {
		inc, err := decodeIncarnation(b)
		if err != nil {
			return
		}
		if re := encodeIncarnation(inc); !bytes.Equal(re, b) {
			t.Fatalf("decoded %d re-encodes to %x, input %x", inc, re, b)
		}
	})
}

func FuzzDecodeAcceptor(f *testing.F) {
	f.Add(mustEncodeAcceptor(promise(3, 1)))
	f.Add(mustEncodeAcceptor(acceptance(9, 4)))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeAcceptor(b)
		if err != nil {
			return
		}
		re, err := encodeAcceptor(r)
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", r, err)
		}
		if !bytes.Equal(re, b) {
			t.Fatalf("decoded %+v re-encodes to %x, input %x", r, re, b)
		}
	})
}

func FuzzDecodeLearned(f *testing.F) {
	f.Add(encodeLearned(*testLearned(2)))
	f.Add(encodeLearned(*testLearned(1 << 40)))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := decodeLearned(b)
		if err != nil {
			return
		}
		if re := encodeLearned(l); !bytes.Equal(re, b) {
			t.Fatalf("decoded %+v re-encodes to %x, input %x", l, re, b)
		}
	})
}

func FuzzDecodeGatePassed(f *testing.F) {
	f.Add(encodeGatePassed(0))
	f.Add(encodeGatePassed(77))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := decodeGatePassed(b)
		if err != nil {
			return
		}
		if re := encodeGatePassed(n); !bytes.Equal(re, b) {
			t.Fatalf("decoded %d re-encodes to %x, input %x", n, re, b)
		}
	})
}

func FuzzDecodeGossip(f *testing.F) {
	f.Add(encodeGossip(map[msg.NodeID]string{}))
	f.Add(encodeGossip(map[msg.NodeID]string{"n1": "127.0.0.1:7947", "n2": "10.0.0.2:7947"}))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := decodeGossip(b)
		if err != nil {
			return
		}
		if re := encodeGossip(g); !bytes.Equal(re, b) {
			t.Fatalf("decoded %v re-encodes to %x, input %x", g, re, b)
		}
	})
}

// FuzzScanRecord feeds arbitrary keys and values to the dispatcher Open uses
// on every stored key: it may refuse them, never panic.
func FuzzScanRecord(f *testing.F) {
	f.Add(acceptorKey(3), mustEncodeAcceptor(promise(3, 1)))
	f.Add(acceptorKey(4), mustEncodeAcceptor(promise(3, 1)))
	f.Add(gatePassedKey(2), encodeGatePassed(2))
	f.Add(identityKey, encodeIdentity(Identity{"n1", 42, "c1"}))
	f.Add(counterKey, encodeCounter(3))
	f.Add(gossipKey, encodeGossip(map[msg.NodeID]string{"n1": "127.0.0.1:1"}))
	f.Add([]byte{0x7f}, []byte{})
	f.Fuzz(func(t *testing.T, k, v []byte) {
		var c contents
		_ = c.add(k, v)
	})
}

func FuzzDecodeCounter(f *testing.F) {
	f.Add(encodeCounter(1))
	f.Add(encodeCounter(1 << 40))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := decodeCounter(b)
		if err != nil {
			return
		}
		if re := encodeCounter(n); !bytes.Equal(re, b) {
			t.Fatalf("decoded %d re-encodes to %x, input %x", n, re, b)
		}
	})
}

// FuzzDecodeCounterSlot covers the counter file's slots (S4): whatever the
// decoder accepts is exactly what the encoder writes, so a damaged slot is
// never read as another counter.
func FuzzDecodeCounterSlot(f *testing.F) {
	f.Add(encodeCounterSlot(42, 7))
	f.Add(encodeCounterSlot(1<<64-1, 1<<64-1))
	f.Add(make([]byte, counterSlotLen))
	f.Fuzz(func(t *testing.T, b []byte) {
		id, n, err := decodeCounterSlot(b)
		if err != nil {
			return
		}
		if re := encodeCounterSlot(id, n); !bytes.Equal(re, b) {
			t.Fatalf("decoded store %x counter %d re-encodes to %x, input %x", id, n, re, b)
		}
	})
}
