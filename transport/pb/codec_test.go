package pb

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/msg"
	"github.com/homelock/homelock/transport/internal/samples"
)

// Every kind survives Encode then Decode unchanged, and the samples cover
// every kind msg defines (a new kind without a wire mapping fails here).
func TestRoundTripEveryKind(t *testing.T) {
	seen := map[msg.Kind]bool{}
	for _, env := range samples.Envelopes() {
		t.Run(env.Body.Kind().String(), func(t *testing.T) {
			b, err := Encode(env)
			require.NoError(t, err)
			got, err := Decode(b)
			require.NoError(t, err)
			require.Equal(t, env, got)
			seen[env.Body.Kind()] = true
		})
	}
	for _, k := range msg.Kinds() {
		require.True(t, seen[k], "no round trip sample for kind %s", k)
	}
}

// Zero values round-trip too, and presence that carries meaning survives:
// a Promise with an empty accepted value is not a Promise with none.
func TestRoundTripZeroValues(t *testing.T) {
	for _, env := range []msg.Envelope{
		{Body: msg.Prepare{}},
		{Body: msg.Promise{Value: &msg.Epoch{}}},
		{Body: msg.Promise{}},
		{Body: msg.Accept{}},
		{Body: msg.Learn{}},
		{Body: msg.Grant{}},
		{Body: msg.ReclaimAnswer{Held: []msg.HeldDelegation{{}}}},
		{Body: msg.Learn{Epoch: msg.Epoch{Members: []msg.Member{{}, {ID: "x"}}}}},
	} {
		b, err := Encode(env)
		require.NoError(t, err)
		got, err := Decode(b)
		require.NoError(t, err)
		require.Equal(t, env, got)
	}
}

func encodeProto(t *testing.T, p *Envelope) []byte {
	t.Helper()
	b, err := proto.Marshal(p)
	require.NoError(t, err)
	return b
}

func grantEnvelope(t *testing.T) []byte {
	t.Helper()
	b, err := Encode(samples.Envelope(samples.Bodies()[msg.KindGrant-1]))
	require.NoError(t, err)
	return b
}

func TestDecodeRefusesUnknownKind(t *testing.T) {
	header := encodeProto(t, &Envelope{FromInc: 3, To: "b"})
	_, err := Decode(header)
	require.ErrorIs(t, err, ErrUnknownMessage, "an envelope without a body")

	// A newer sender's body kind is a oneof field this version lacks: it
	// lands among the unknown fields and the oneof stays empty.
	newer := protowire.AppendTag(bytes.Clone(header), 46, protowire.BytesType)
	newer = protowire.AppendBytes(newer, []byte{0x08, 0x01})
	_, err = Decode(newer)
	require.ErrorIs(t, err, ErrUnknownMessage)
}

func TestDecodeRefusesUnknownFields(t *testing.T) {
	t.Run("envelope", func(t *testing.T) {
		b := protowire.AppendTag(grantEnvelope(t), 15, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
		_, err := Decode(b)
		require.ErrorIs(t, err, ErrUnknownField)
	})
	t.Run("body", func(t *testing.T) {
		// A Grant with a field a newer version added (say, a lease cap).
		inner, err := proto.Marshal(&Grant{Key: []byte("k"), LeaseNanos: 5})
		require.NoError(t, err)
		inner = protowire.AppendTag(inner, 99, protowire.VarintType)
		inner = protowire.AppendVarint(inner, 77)
		b := protowire.AppendTag(nil, 32, protowire.BytesType)
		b = protowire.AppendBytes(b, inner)
		_, err = Decode(b)
		require.ErrorIs(t, err, ErrUnknownField)
		require.Contains(t, err.Error(), "Grant")
	})
	t.Run("member in a list", func(t *testing.T) {
		member, err := proto.Marshal(&Member{Id: "a"})
		require.NoError(t, err)
		member = protowire.AppendTag(member, 5, protowire.Fixed32Type)
		member = protowire.AppendFixed32(member, 1)
		epoch := protowire.AppendTag(nil, 2, protowire.BytesType)
		epoch = protowire.AppendBytes(epoch, member)
		learn := protowire.AppendTag(nil, 1, protowire.BytesType)
		learn = protowire.AppendBytes(learn, epoch)
		b := protowire.AppendTag(nil, 25, protowire.BytesType)
		b = protowire.AppendBytes(b, learn)
		_, err = Decode(b)
		require.ErrorIs(t, err, ErrUnknownField)
		require.Contains(t, err.Error(), "Member")
	})
}

func TestDecodeRefusesBadEnums(t *testing.T) {
	for _, p := range []*Envelope{
		{Body: &Envelope_RenewalAnswer{RenewalAnswer: &RenewalAnswer{Result: 99}}},
		{Body: &Envelope_RenewalAnswer{RenewalAnswer: &RenewalAnswer{Result: -1}}},
		{Body: &Envelope_RenewalAnswer{RenewalAnswer: &RenewalAnswer{}}},
		{Body: &Envelope_Refused{Refused: &Refused{Reason: 6}}},
		{Body: &Envelope_Refused{Refused: &Refused{Reason: 256 + 1}}},
	} {
		_, err := Decode(encodeProto(t, p))
		require.ErrorIs(t, err, ErrBadEnum, "%v", p)
	}
}

func TestDecodeRefusesOversize(t *testing.T) {
	many := make([]*Member, MaxMembers+1)
	for i := range many {
		many[i] = &Member{Id: "m"}
	}
	for name, p := range map[string]*Envelope{
		"key":      {Body: &Envelope_Acquire{Acquire: &Acquire{Key: bytes.Repeat([]byte("k"), MaxKeyLen+1)}}},
		"barrier":  {Body: &Envelope_Release{Release: &Release{Barrier: make([]byte, MaxBarrierLen+1)}}},
		"signed":   {Body: &Envelope_Grant{Grant: &Grant{Signed: make([]byte, MaxSignedLen+1)}}},
		"node ID":  {To: strings.Repeat("n", MaxIDLen+1), Body: &Envelope_Reclaim{Reclaim: &Reclaim{}}},
		"addr":     {From: &Member{Addr: strings.Repeat("a", MaxAddrLen+1)}, Body: &Envelope_Reclaim{Reclaim: &Reclaim{}}},
		"members":  {Body: &Envelope_Learn{Learn: &Learn{Epoch: &Epoch{Members: many}}}},
		"held key": {Body: &Envelope_ReclaimAnswer{ReclaimAnswer: &ReclaimAnswer{Held: []*HeldDelegation{{Key: make([]byte, MaxKeyLen+1)}}}}},
	} {
		_, err := Decode(encodeProto(t, p))
		require.ErrorIs(t, err, ErrMessageTooLarge, name)
	}
	// The whole envelope is bounded before anything is parsed.
	_, err := Decode(make([]byte, MaxEnvelopeSize+1))
	require.ErrorIs(t, err, ErrMessageTooLarge)
}

func TestDecodeRefusesMalformed(t *testing.T) {
	for name, b := range map[string][]byte{
		"truncated":  grantEnvelope(t)[:10],
		"wire type":  {0x08 | 0x02, 0x05},
		"bad varint": {0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"non-utf8":   encodeRaw(3, []byte{0xff, 0xfe}),
	} {
		_, err := Decode(b)
		require.ErrorIs(t, err, ErrMalformed, name)
	}
}

func encodeRaw(field protowire.Number, v []byte) []byte {
	b := protowire.AppendTag(nil, field, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

// Encode refuses what Decode would refuse, so the bug shows at the sender.
func TestEncodeRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		env  msg.Envelope
		want error
	}{
		"nil body":       {msg.Envelope{}, ErrUnknownMessage},
		"pointer body":   {msg.Envelope{Body: &msg.Grant{}}, ErrUnknownMessage},
		"foreign body":   {msg.Envelope{Body: foreign{}}, ErrUnknownMessage},
		"bad enum":       {msg.Envelope{Body: msg.RenewalAnswer{Result: 42}}, ErrBadEnum},
		"zero enum":      {msg.Envelope{Body: msg.Refused{}}, ErrBadEnum},
		"long key":       {msg.Envelope{Body: msg.Recall{Key: strings.Repeat("k", MaxKeyLen+1)}}, ErrMessageTooLarge},
		"long barrier":   {msg.Envelope{Body: msg.Drained{Barrier: make([]byte, MaxBarrierLen+1)}}, ErrMessageTooLarge},
		"live no holder": {msg.Envelope{Body: msg.Drained{Live: &msg.HandedOver{Token: fence.Token{Epoch: 1, Incarnation: 1, Counter: 1}}}}, ErrMalformed},
		"many held":      {msg.Envelope{Body: msg.ReclaimAnswer{Held: make([]msg.HeldDelegation, MaxHeld+1)}}, ErrMessageTooLarge},
	} {
		_, err := Encode(tc.env)
		require.ErrorIs(t, err, tc.want, name)
	}
}

type foreign struct{}

func (foreign) Kind() msg.Kind { return msg.KindGrant }

// FuzzDecode: no input panics Decode, and whatever it accepts is a fixed
// point: it encodes, and decodes back to the same value.
func FuzzDecode(f *testing.F) {
	for _, env := range samples.Envelopes() {
		b, err := Encode(env)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{0xaa, 0x02, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		env, err := Decode(b)
		if err != nil {
			for _, known := range []error{ErrUnknownMessage, ErrUnknownField, ErrBadEnum, ErrMessageTooLarge, ErrMalformed} {
				if errors.Is(err, known) {
					return
				}
			}
			t.Fatalf("unnamed error: %v", err)
		}
		var p Envelope
		if proto.Unmarshal(b, &p) == nil && unknownFields(p.ProtoReflect()) != "" {
			t.Fatalf("accepted an envelope with unknown fields in %s", unknownFields(p.ProtoReflect()))
		}
		again, err := Encode(env)
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", env, err)
		}
		back, err := Decode(again)
		if err != nil {
			t.Fatalf("re-encoded envelope does not decode: %v", err)
		}
		require.Equal(t, env, back)
	})
}

// unknownFields is the oracle for the converters' known checks: a reflective
// walk naming the first message in m's tree with unknown fields.
func unknownFields(m protoreflect.Message) string {
	if len(m.GetUnknown()) > 0 {
		return string(m.Descriptor().Name())
	}
	where := ""
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Message() == nil || fd.IsMap() {
			return true
		}
		if fd.IsList() {
			l := v.List()
			for i := 0; i < l.Len() && where == ""; i++ {
				where = unknownFields(l.Get(i).Message())
			}
		} else {
			where = unknownFields(v.Message())
		}
		return where == ""
	})
	return where
}

// Every message type in the schema is checked for unknown fields: for each
// sample, inject an unknown field into each nested message in turn.
func TestUnknownFieldsAnywhere(t *testing.T) {
	for _, env := range samples.Envelopes() {
		p, err := ToProto(env)
		require.NoError(t, err)
		var targets []protoreflect.Message
		var collect func(m protoreflect.Message)
		collect = func(m protoreflect.Message) {
			targets = append(targets, m)
			m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
				if fd.Message() == nil {
					return true
				}
				if fd.IsList() {
					for i := 0; i < v.List().Len(); i++ {
						collect(v.List().Get(i).Message())
					}
				} else {
					collect(v.Message())
				}
				return true
			})
		}
		collect(p.ProtoReflect())
		for _, m := range targets {
			m.SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 1000, protowire.VarintType), 1))
			b, err := proto.Marshal(p)
			require.NoError(t, err)
			_, err = Decode(b)
			require.ErrorIs(t, err, ErrUnknownField, "%s: unknown field in %s", env.Body.Kind(), m.Descriptor().Name())
			m.SetUnknown(nil)
		}
	}
}

func BenchmarkEncodeAcquire(b *testing.B) {
	env := samples.Envelope(samples.Bodies()[msg.KindAcquire-1])
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = AppendEncode(buf[:0], env); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkDecodeGrant(b *testing.B) {
	data, err := Encode(samples.Envelope(samples.Bodies()[msg.KindGrant-1]))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}
