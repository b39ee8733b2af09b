package pb

import (
	"bytes"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/msg"
	"github.com/homelock/homelock/transport/internal/samples"
)

// directKinds are the kinds the direct codec carries; the rest go through
// the generated code.
var directKinds = map[msg.Kind]bool{
	msg.KindAcquire: true, msg.KindGrant: true, msg.KindWait: true, msg.KindNotHome: true,
	msg.KindRefused: true, msg.KindRecall: true, msg.KindRelease: true, msg.KindRenew: true,
	msg.KindRenewReply: true, msg.KindWithdraw: true, msg.KindRenewal: true, msg.KindRenewalAnswer: true,
}

// edgeEnvelopes are direct-kind envelopes at the edges of their fields:
// zero everything, the largest values, negative durations, a token with only
// a section, keys and barriers at their bounds, messages over 127 bytes.
func edgeEnvelopes() []msg.Envelope {
	max := uint64(math.MaxUint64)
	bigKey := strings.Repeat("k", MaxKeyLen)
	var out []msg.Envelope
	for _, body := range []msg.Body{
		msg.Acquire{}, msg.Grant{}, msg.Wait{}, msg.NotHome{}, msg.Recall{}, msg.Release{}, msg.Renew{},
		msg.RenewReply{}, msg.Withdraw{}, msg.Renewal{},
		msg.Refused{Reason: msg.RefusedDuplicateID},
		msg.RenewalAnswer{Result: msg.RenewalOK, Promised: max},
		msg.Acquire{Key: "\x00\xff", Req: msg.RequestID{Inc: max}, Attempt: math.MaxUint32, Lease: -time.Nanosecond},
		msg.Grant{Key: bigKey, Token: fence.Token{Section: 9}, Lease: math.MinInt64, Barrier: make([]byte, MaxBarrierLen), Signed: make([]byte, MaxSignedLen)},
		msg.Grant{Token: fence.Token{Counter: max}, Signed: bytes.Repeat([]byte{7}, 200)},
		msg.Wait{Reason: msg.WaitLiveness, Req: msg.RequestID{Seq: 1}},
		msg.Release{Key: bigKey, Token: fence.Token{Epoch: 1}, Barrier: []byte{0}},
		msg.RenewReply{OK: true, Lease: math.MaxInt64},
	} {
		out = append(out, msg.Envelope{Body: body})
		env := samples.Envelope(body)
		out = append(out, env)
		env.From = msg.Member{ID: msg.NodeID(strings.Repeat("n", MaxIDLen)), Store: max, Addr: strings.Repeat("a", MaxAddrLen), Version: math.MaxUint32}
		env.FromInc, env.Epoch, env.Digest, env.Version = max, max, max, math.MaxUint32
		env.To = msg.NodeID(strings.Repeat("é", MaxIDLen/2))
		out = append(out, env)
	}
	return append(out, samples.Envelopes()...)
}

// The direct codec writes, byte for byte, what the generated code writes,
// for every kind it carries, and declines every other kind.
func TestDirectWritesWhatGeneratedWrites(t *testing.T) {
	prefix := []byte("prefix")
	for _, env := range edgeEnvelopes() {
		want, err := appendGenerated(nil, env)
		require.NoError(t, err)
		got, ok := appendDirect(bytes.Clone(prefix), env)
		require.Equal(t, directKinds[env.Body.Kind()], ok, "%s", env.Body.Kind())
		if !ok {
			require.Equal(t, prefix, got, "a declined envelope leaves the buffer as it was")
			continue
		}
		require.Equal(t, prefix, got[:len(prefix)])
		require.Equal(t, want, got[len(prefix):], "%+v", env)
	}
}

// What the generated code refuses to encode the direct codec declines,
// leaving the buffer as it was, and Encode still names the error.
func TestDirectDeclinesWhatEncodeRefuses(t *testing.T) {
	long := strings.Repeat("x", MaxKeyLen+1)
	for name, tc := range map[string]struct {
		env  msg.Envelope
		want error
	}{
		"long key":        {msg.Envelope{Body: msg.Acquire{Key: long}}, ErrMessageTooLarge},
		"long barrier":    {msg.Envelope{Body: msg.Release{Barrier: make([]byte, MaxBarrierLen+1)}}, ErrMessageTooLarge},
		"long signed":     {msg.Envelope{Body: msg.Grant{Signed: make([]byte, MaxSignedLen+1)}}, ErrMessageTooLarge},
		"long to":         {msg.Envelope{To: msg.NodeID(long[:MaxIDLen+1]), Body: msg.Renewal{}}, ErrMessageTooLarge},
		"long from id":    {msg.Envelope{From: msg.Member{ID: msg.NodeID(long[:MaxIDLen+1])}, Body: msg.Renewal{}}, ErrMessageTooLarge},
		"long from addr":  {msg.Envelope{From: msg.Member{Addr: long[:MaxAddrLen+1]}, Body: msg.Renewal{}}, ErrMessageTooLarge},
		"non-UTF-8 to":    {msg.Envelope{To: "\xff", Body: msg.Renewal{}}, ErrMalformed},
		"non-UTF-8 id":    {msg.Envelope{From: msg.Member{ID: "\xff"}, Body: msg.Renewal{}}, ErrMalformed},
		"non-UTF-8 addr":  {msg.Envelope{From: msg.Member{Addr: "\xc0"}, Body: msg.Renewal{}}, ErrMalformed},
		"wait reason":     {msg.Envelope{Body: msg.Wait{Reason: msg.WaitLiveness + 1}}, ErrBadEnum},
		"refusal zero":    {msg.Envelope{Body: msg.Refused{}}, ErrBadEnum},
		"refusal high":    {msg.Envelope{Body: msg.Refused{Reason: msg.RefusedDuplicateID + 1}}, ErrBadEnum},
		"renewal zero":    {msg.Envelope{Body: msg.RenewalAnswer{}}, ErrBadEnum},
		"renewal high":    {msg.Envelope{Body: msg.RenewalAnswer{Result: msg.RenewalUnknownEpoch + 1}}, ErrBadEnum},
		"pointer to body": {msg.Envelope{Body: &msg.Acquire{}}, ErrUnknownMessage},
	} {
		got, ok := appendDirect([]byte("p"), tc.env)
		require.False(t, ok, name)
		require.Equal(t, []byte("p"), got, name)
		_, err := Encode(tc.env)
		require.ErrorIs(t, err, tc.want, name)
	}
}

// The direct codec reads what Encode writes of its kinds, and what it reads
// equals what the generated code reads.
func TestDirectReadsWhatEncodeWrites(t *testing.T) {
	for _, env := range edgeEnvelopes() {
		b, err := Encode(env)
		require.NoError(t, err)
		want, err := decodeGenerated(b)
		require.NoError(t, err)
		got, ok := decodeDirect(b, nil)
		require.Equal(t, directKinds[env.Body.Kind()], ok, "%s", env.Body.Kind())
		if ok {
			require.Equal(t, want, got)
		}
	}
}

func field(b []byte, num protowire.Number, typ protowire.Type, v []byte) []byte {
	b = protowire.AppendTag(b, num, typ)
	switch typ {
	case protowire.VarintType:
		n, _ := protowire.ConsumeVarint(v)
		return protowire.AppendVarint(b, n)
	case protowire.Fixed64Type:
		return append(b, v[:8]...)
	}
	return protowire.AppendBytes(b, v)
}

func varint(v uint64) []byte { return protowire.AppendVarint(nil, v) }

func body(kind msg.Kind, fields []byte) []byte {
	return field(nil, bodyField(kind), protowire.BytesType, fields)
}

// Forms the direct codec does not read go through the generated code, with
// its result: a repeated message field merges, a repeated scalar keeps the
// last, a second body replaces the first, and a value the generated code
// narrows is narrowed. The rest are refused as before.
func TestDirectLeavesOtherFormsToGenerated(t *testing.T) {
	token1 := field(nil, 1, protowire.VarintType, varint(1))
	token3 := field(nil, 3, protowire.VarintType, varint(3))
	for name, tc := range map[string]struct {
		b    []byte
		want msg.Envelope
		err  error
	}{
		"token twice merges": {
			b:    body(msg.KindRecall, field(field(nil, 2, protowire.BytesType, token1), 2, protowire.BytesType, token3)),
			want: msg.Envelope{Body: msg.Recall{Token: fence.Token{Epoch: 1, Counter: 3}}},
		},
		"scalar twice keeps the last": {
			b:    append(field(nil, 2, protowire.VarintType, varint(4)), append(field(nil, 2, protowire.VarintType, varint(5)), body(msg.KindRenewal, nil)...)...),
			want: msg.Envelope{FromInc: 5, Body: msg.Renewal{}},
		},
		"second body replaces the first": {
			b:    append(body(msg.KindRenewal, field(nil, 1, protowire.VarintType, varint(1))), body(msg.KindNotHome, nil)...),
			want: msg.Envelope{Body: msg.NotHome{}},
		},
		"attempt over 32 bits is narrowed": {
			b:    body(msg.KindAcquire, field(nil, 3, protowire.VarintType, varint(1<<32+7))),
			want: msg.Envelope{Body: msg.Acquire{Attempt: 7}},
		},
		"enum over 32 bits is narrowed": {
			b:    body(msg.KindRefused, field(nil, 3, protowire.VarintType, varint(1<<32+1))),
			want: msg.Envelope{Body: msg.Refused{Reason: msg.RefusedNotMember}},
		},
		"enum over 8 bits":   {b: body(msg.KindWait, field(nil, 4, protowire.VarintType, varint(256+1))), err: ErrBadEnum},
		"unknown body field": {b: body(msg.KindGrant, field(nil, 10, protowire.VarintType, varint(1))), err: ErrUnknownField},
		"unknown header":     {b: append(field(nil, 7, protowire.VarintType, varint(1)), body(msg.KindRenewal, nil)...), err: ErrUnknownField},
		"unknown in token":   {b: body(msg.KindRecall, field(nil, 2, protowire.BytesType, field(nil, 4, protowire.VarintType, varint(1)))), err: ErrUnknownField},
		"wrong wire type":    {b: body(msg.KindRenewal, field(nil, 1, protowire.Fixed64Type, make([]byte, 8))), err: ErrUnknownField},
		"non-UTF-8 to":       {b: append(field(nil, 3, protowire.BytesType, []byte{0xff}), body(msg.KindRenewal, nil)...), err: ErrMalformed},
		"truncated body":     {b: body(msg.KindAcquire, []byte{0x0a, 0x05, 'k'}), err: ErrMalformed},
		"long key":           {b: body(msg.KindRelease, field(nil, 1, protowire.BytesType, make([]byte, MaxKeyLen+1))), err: ErrMessageTooLarge},
		"no refusal reason":  {b: body(msg.KindRefused, nil), err: ErrBadEnum},
		"body of another kind": {
			b:    body(msg.KindPrepare, field(nil, 1, protowire.VarintType, varint(9))),
			want: msg.Envelope{Body: msg.Prepare{Instance: 9}},
		},
	} {
		_, ok := decodeDirect(tc.b, nil)
		require.False(t, ok, name)
		got, err := Decode(tc.b)
		if tc.err != nil {
			require.ErrorIs(t, err, tc.err, name)
			continue
		}
		require.NoError(t, err, name)
		require.Equal(t, tc.want, got, name)
	}
}

// FuzzDirectDecode: whatever the direct codec reads, the generated code reads
// to the same value.
func FuzzDirectDecode(f *testing.F) {
	for _, env := range edgeEnvelopes() {
		b, err := Encode(env)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// A Decoder, with its names cached or not, reads what Decode reads.
		want, wantErr := Decode(b)
		var d Decoder
		for range 2 {
			env, err := d.Decode(b)
			require.Equal(t, wantErr, err)
			require.Equal(t, want, env)
		}
		got, ok := decodeDirect(b, nil)
		if !ok {
			return
		}
		want, err := decodeGenerated(b)
		if err != nil {
			t.Fatalf("direct read %+v where the generated code refuses: %v", got, err)
		}
		require.Equal(t, want, got)
	})
}

// FuzzDirectEncode: for envelopes of the direct kinds built from arbitrary
// fields, the direct codec writes exactly what the generated code writes, and
// declines exactly what it refuses.
func FuzzDirectEncode(f *testing.F) {
	f.Add(uint8(0), "key", "to", "id", "addr", uint64(1), uint64(2), uint64(3), uint32(4), true, []byte("barrier"), uint8(1))
	f.Add(uint8(1), "", "", "", "", uint64(0), uint64(0), uint64(0), uint32(0), false, []byte(nil), uint8(0))
	f.Add(uint8(4), "\xff", "\xff", "é", "", uint64(math.MaxUint64), uint64(1<<63), uint64(1), uint32(math.MaxUint32), true, []byte{0}, uint8(6))
	kinds := slices.Sorted(maps.Keys(directKinds))
	f.Fuzz(func(t *testing.T, kind uint8, key, to, id, addr string, x, y, z uint64, n uint32, flag bool, blob []byte, enum uint8) {
		req := msg.RequestID{Inc: x, Seq: y}
		tok := fence.Token{Epoch: x, Incarnation: y, Counter: z, Section: uint64(n)}
		lease := time.Duration(int64(z))
		var b msg.Body
		switch kinds[int(kind)%len(kinds)] {
		case msg.KindAcquire:
			b = msg.Acquire{Key: key, Req: req, Attempt: n, Lease: lease, Queued: flag}
		case msg.KindGrant:
			b = msg.Grant{Key: key, Req: req, Attempt: n, Token: tok, Lease: lease, Barrier: blob, Recalled: flag, Signed: []byte(addr), Contended: !flag}
		case msg.KindWait:
			b = msg.Wait{Key: key, Req: req, Attempt: n, Reason: msg.WaitReason(enum)}
		case msg.KindNotHome:
			b = msg.NotHome{Key: key, Req: req}
		case msg.KindRefused:
			b = msg.Refused{Key: key, Req: req, Reason: msg.RefuseReason(enum)}
		case msg.KindRecall:
			b = msg.Recall{Key: key, Token: tok}
		case msg.KindRelease:
			b = msg.Release{Key: key, Token: tok, Barrier: blob}
		case msg.KindRenew:
			b = msg.Renew{Key: key, Token: tok, Attempt: n, Lease: lease}
		case msg.KindRenewReply:
			b = msg.RenewReply{Key: key, Token: tok, Attempt: n, OK: flag, Lease: lease}
		case msg.KindWithdraw:
			b = msg.Withdraw{Key: key, Req: req}
		case msg.KindRenewal:
			b = msg.Renewal{Nonce: x}
		case msg.KindRenewalAnswer:
			b = msg.RenewalAnswer{Nonce: x, Result: msg.RenewalResult(enum), Promised: y}
		default:
			t.Fatalf("kind %d is not a direct kind", kind)
		}
		env := msg.Envelope{From: msg.Member{ID: msg.NodeID(id), Store: y, Addr: addr, Version: n}, FromInc: x, To: msg.NodeID(to), Epoch: y, Digest: z, Version: n, Body: b}
		want, err := appendGenerated(nil, env)
		got, ok := appendDirect(nil, env)
		if ok != (err == nil) {
			t.Fatalf("direct ok %t, generated error %v, for %+v", ok, err, env)
		}
		if ok {
			require.Equal(t, want, got)
		}
	})
}

// A Decoder reads a stream's envelopes as Decode does, whichever names
// change from one to the next, and allocates the names only when they do.
func TestDecoderCachesNames(t *testing.T) {
	grant := samples.Envelope(samples.Bodies()[msg.KindGrant-1])
	grant.From = msg.Member{ID: "node-1", Store: 1, Addr: "10.0.0.1:7946", Version: 2}
	grant.To = "node-2"
	other := grant
	other.From.ID, other.From.Addr, other.To = "node-3", "10.0.0.3:7946", "node-4"
	var d Decoder
	for i, env := range []msg.Envelope{grant, grant, other, grant, {Body: msg.Renewal{Nonce: 1}}, grant} {
		b, err := Encode(env)
		require.NoError(t, err)
		got, err := d.Decode(b)
		require.NoError(t, err)
		require.Equal(t, env, got, "envelope %d", i)
	}
	badTo, err := Encode(grant)
	require.NoError(t, err)
	i := bytes.Index(badTo, []byte("node-2"))
	badTo[i+len("node-2")-1] = 0xff
	_, err = d.Decode(badTo)
	require.ErrorIs(t, err, ErrMalformed, "a name that is not UTF-8 is refused, cache or not")

	b, err := Encode(grant)
	require.NoError(t, err)
	_, err = d.Decode(b)
	require.NoError(t, err)
	plain := testing.AllocsPerRun(100, func() { _, _ = Decode(b) })
	cached := testing.AllocsPerRun(100, func() { _, _ = d.Decode(b) })
	require.Equal(t, plain-3, cached, "the sender's ID and address and the receiver's ID come from the cache")
}

func BenchmarkDecodeGrantGenerated(b *testing.B) {
	data, err := Encode(samples.Envelope(samples.Bodies()[msg.KindGrant-1]))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeGenerated(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeAcquireGenerated(b *testing.B) {
	env := samples.Envelope(samples.Bodies()[msg.KindAcquire-1])
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = appendGenerated(buf[:0], env); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(buf)))
}
