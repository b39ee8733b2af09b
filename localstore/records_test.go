package localstore

import (
	"math"
	"testing"

	"github.com/homelock/homelock/epoch"
	"github.com/homelock/homelock/msg"
)

// Every record kind survives encode then decode unchanged, and its encoding
// is canonical: every strict prefix of it is refused (no field is optional).
func TestRecordRoundTrip(t *testing.T) {
	wide := msg.Epoch{Number: math.MaxUint64, Caps: msg.Caps{Ring: math.MaxUint32},
		Members: []msg.Member{{ID: "ünï", Store: math.MaxUint64, Addr: "", Version: math.MaxUint32}}}
	noMembers := msg.Epoch{Number: 1}
	tests := []struct {
		name   string
		encode func() []byte
		decode func([]byte) (any, error)
		want   any
	}{
		{"identity", func() []byte { return encodeIdentity(Identity{"n1", 42, "c1"}) },
			func(b []byte) (any, error) { return decodeIdentity(b) }, Identity{"n1", 42, "c1"}},
		{"identity/wide", func() []byte { return encodeIdentity(Identity{"ñode-with-a-long-name", math.MaxUint64, "🔒"}) },
			func(b []byte) (any, error) { return decodeIdentity(b) }, Identity{"ñode-with-a-long-name", math.MaxUint64, "🔒"}},
		{"incarnation/1", func() []byte { return encodeIncarnation(1) },
			func(b []byte) (any, error) { return decodeIncarnation(b) }, uint64(1)},
		{"incarnation/128", func() []byte { return encodeIncarnation(128) },
			func(b []byte) (any, error) { return decodeIncarnation(b) }, uint64(128)},
		{"incarnation/max", func() []byte { return encodeIncarnation(math.MaxUint64) },
			func(b []byte) (any, error) { return decodeIncarnation(b) }, uint64(math.MaxUint64)},
		{"acceptor/promise", func() []byte { return mustEncodeAcceptor(promise(7, 3)) },
			func(b []byte) (any, error) { return decodeAcceptor(b) }, promise(7, 3)},
		{"acceptor/accepted", func() []byte { return mustEncodeAcceptor(acceptance(7, 3)) },
			func(b []byte) (any, error) { return decodeAcceptor(b) }, acceptance(7, 3)},
		{"acceptor/zero", func() []byte { return mustEncodeAcceptor(epoch.AcceptorRecord{}) },
			func(b []byte) (any, error) { return decodeAcceptor(b) }, epoch.AcceptorRecord{}},
		{"acceptor/wide", func() []byte {
			return mustEncodeAcceptor(epoch.AcceptorRecord{Instance: math.MaxUint64,
				Promised: msg.Ballot{Counter: math.MaxUint64, Node: "z"}, Accepted: msg.Ballot{Counter: 1}, Value: &wide})
		}, func(b []byte) (any, error) { return decodeAcceptor(b) },
			epoch.AcceptorRecord{Instance: math.MaxUint64,
				Promised: msg.Ballot{Counter: math.MaxUint64, Node: "z"}, Accepted: msg.Ballot{Counter: 1}, Value: &wide}},
		{"acceptor/empty-epoch", func() []byte {
			return mustEncodeAcceptor(epoch.AcceptorRecord{Instance: 1, Accepted: msg.Ballot{Counter: 1}, Value: &noMembers})
		}, func(b []byte) (any, error) { return decodeAcceptor(b) },
			epoch.AcceptorRecord{Instance: 1, Accepted: msg.Ballot{Counter: 1}, Value: &noMembers}},
		{"learned", func() []byte { return encodeLearned(*testLearned(5)) },
			func(b []byte) (any, error) { return decodeLearned(b) }, *testLearned(5)},
		{"learned/bare", func() []byte { return encodeLearned(epoch.Learned{Epoch: wide}) },
			func(b []byte) (any, error) { return decodeLearned(b) }, epoch.Learned{Epoch: wide}},
		{"gate/0", func() []byte { return encodeGatePassed(0) },
			func(b []byte) (any, error) { return decodeGatePassed(b) }, uint64(0)},
		{"gate/max", func() []byte { return encodeGatePassed(math.MaxUint64) },
			func(b []byte) (any, error) { return decodeGatePassed(b) }, uint64(math.MaxUint64)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.encode()
			got, err := tt.decode(b)
			noErr(t, err)
			eq(t, got, tt.want)
			for i := range len(b) {
				_, err := tt.decode(b[:i])
				if err == nil {
					t.Fatalf("prefix of %d/%d bytes decoded", i, len(b))
				}
			}
		})
	}
}

func mustEncodeAcceptor(r epoch.AcceptorRecord) []byte {
	b, err := encodeAcceptor(r)
	if err != nil {
		panic(err)
	}
	return b
}

// Decoders refuse anything the encoders would not have written.
func TestRecordRefusals(t *testing.T) {
	identity := func(b []byte) error { _, err := decodeIdentity(b); return err }
	incarnation := func(b []byte) error { _, err := decodeIncarnation(b); return err }
	acceptor := func(b []byte) error { _, err := decodeAcceptor(b); return err }
	learned := func(b []byte) error { _, err := decodeLearned(b); return err }
	gate := func(b []byte) error { _, err := decodeGatePassed(b); return err }
	okIdentity := encodeIdentity(Identity{"n1", 42, "c1"})
	tests := []struct {
		name   string
		decode func([]byte) error
		in     []byte
		want   string
	}{
		{"identity/empty", identity, nil, "truncated"},
		{"identity/version", identity, append([]byte{2}, okIdentity[1:]...), "unknown record version 2"},
		{"identity/trailing", identity, append(okIdentity, 0), "1 trailing bytes"},
		{"identity/zero-store", identity, encodeIdentity(Identity{"n1", 0, "c1"}), "zero store ID"},
		{"identity/no-node", identity, encodeIdentity(Identity{"", 1, "c1"}), "empty node ID"},
		{"identity/no-cluster", identity, encodeIdentity(Identity{"n1", 1, ""}), "empty cluster ID"},
		{"identity/long-string", identity, []byte{1, 200, 1, 'x'}, "truncated"},
		{"incarnation/zero", incarnation, []byte{1, 0}, "zero"},
		{"incarnation/non-minimal", incarnation, []byte{1, 0x81, 0x00}, "non-minimal varint"},
		{"incarnation/overflow", incarnation, []byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, "bad varint"},
		{"acceptor/bad-bool", acceptor, []byte{1, 1, 0, 0, 0, 0, 2}, "bad bool"},
		{"acceptor/value-without-ballot", acceptor, []byte{1, 1, 0, 0, 0, 0, 1, 1, 0, 0}, "value present=true"},
		{"acceptor/ballot-without-value", acceptor, []byte{1, 1, 0, 0, 5, 0, 0}, "value present=false"},
		{"acceptor/forged-count", acceptor, []byte{1, 1, 0, 0, 1, 0, 1, 1, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}, "truncated"},
		{"learned/ring-overflow", learned, []byte{1, 1, 0x80, 0x80, 0x80, 0x80, 0x10, 0, 0, 0, 0, 0, 0, 0}, "does not fit 32 bits"},
		{"gate/version-0", gate, []byte{0, 1}, "unknown record version 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.decode(tt.in)
			errContains(t, err, tt.want)
		})
	}
}

// Commit refuses to store what it could not read back.
func TestEncodeAcceptorRefusesInconsistentRecord(t *testing.T) {
	v := testEpoch(1)
	_, err := encodeAcceptor(epoch.AcceptorRecord{Instance: 1, Value: &v})
	errContains(t, err, "value present=true")
	_, err = encodeAcceptor(epoch.AcceptorRecord{Instance: 1, Accepted: msg.Ballot{Counter: 1}})
	errContains(t, err, "value present=false")
}
