package pb

import (
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/msg"
)

// The direct codec carries the messages a lock sends (the delegation kinds and
// epoch renewals, a few flat bodies) between msg values and wire bytes
// without the generated protobuf structs: the conversion through them cost
// a lock more allocations than everything else in a step. It writes exactly
// the bytes proto.Marshal writes for the same envelope, and it accepts only
// the plain form of a message: every field known, of its declared wire type,
// at most once. Whatever it declines (another kind, a duplicate field that
// protobuf would merge, anything it would refuse) goes through the generated
// code and its checks as before, so what Decode accepts, refuses and returns
// does not depend on which path read it; the tests hold the two paths to
// that.

// appendDirect appends env's wire form to b; ok is false when env is not a
// kind the direct codec writes or fails a check (the caller then encodes it
// through the generated code, which names the error). On false, b's length is
// unchanged.
func appendDirect(b []byte, env msg.Envelope) (_ []byte, ok bool) {
	start := len(b)
	ok = validString(string(env.To), MaxIDLen)
	if env.From != (msg.Member{}) {
		at := beginNested(protowire.AppendTag(b, 1, protowire.BytesType))
		b = appendString(at, 1, string(env.From.ID))
		b = appendUint(b, 2, env.From.Store)
		b = appendString(b, 3, env.From.Addr)
		b = endNested(appendUint(b, 4, uint64(env.From.Version)), len(at))
		ok = ok && validString(string(env.From.ID), MaxIDLen) && validString(env.From.Addr, MaxAddrLen)
	}
	b = appendUint(b, 2, env.FromInc)
	b = appendString(b, 3, string(env.To))
	b = appendUint(b, 4, env.Epoch)
	b = appendUint(b, 5, env.Digest)
	b = appendUint(b, 6, uint64(env.Version))
	if env.Body == nil {
		return b[:start], false
	}
	body := beginNested(protowire.AppendTag(b, bodyField(env.Body.Kind()), protowire.BytesType))
	b, bodyOK := appendBody(body, env.Body)
	if !ok || !bodyOK {
		return b[:start], false
	}
	return endNested(b, len(body)), true
}

// appendBody appends a body's fields; ok is false for a kind the direct
// codec leaves to the generated code, or a body that fails a check.
func appendBody(b []byte, body msg.Body) (_ []byte, ok bool) {
	switch v := body.(type) {
	case msg.Acquire:
		b, ok = appendKey(b, 1, v.Key)
		b = appendRequest(b, 2, v.Req)
		b = appendUint(b, 3, uint64(v.Attempt))
		b = appendUint(b, 4, uint64(v.Lease))
		return appendBool(b, 5, v.Queued), ok
	case msg.Grant:
		b, ok = appendKey(b, 1, v.Key)
		b = appendRequest(b, 2, v.Req)
		b = appendUint(b, 3, uint64(v.Attempt))
		b = appendToken(b, 4, v.Token)
		b = appendUint(b, 5, uint64(v.Lease))
		b = appendBytes(b, 6, v.Barrier)
		b = appendBool(b, 7, v.Recalled)
		b = appendBytes(b, 8, v.Signed)
		b = appendBool(b, 9, v.Contended)
		return b, ok && len(v.Barrier) <= MaxBarrierLen && len(v.Signed) <= MaxSignedLen
	case msg.Wait:
		b, ok = appendKey(b, 1, v.Key)
		b = appendRequest(b, 2, v.Req)
		b = appendUint(b, 3, uint64(v.Attempt))
		return appendUint(b, 4, uint64(v.Reason)), ok && v.Reason <= msg.WaitLiveness
	case msg.NotHome:
		b, ok = appendKey(b, 1, v.Key)
		return appendRequest(b, 2, v.Req), ok
	case msg.Refused:
		b, ok = appendKey(b, 1, v.Key)
		b = appendRequest(b, 2, v.Req)
		return appendUint(b, 3, uint64(v.Reason)), ok && v.Reason >= msg.RefusedNotMember && v.Reason <= msg.RefusedDuplicateID
	case msg.Recall:
		b, ok = appendKey(b, 1, v.Key)
		return appendToken(b, 2, v.Token), ok
	case msg.Release:
		b, ok = appendKey(b, 1, v.Key)
		b = appendToken(b, 2, v.Token)
		return appendBytes(b, 3, v.Barrier), ok && len(v.Barrier) <= MaxBarrierLen
	case msg.Renew:
		b, ok = appendKey(b, 1, v.Key)
		b = appendToken(b, 2, v.Token)
		b = appendUint(b, 3, uint64(v.Attempt))
		return appendUint(b, 4, uint64(v.Lease)), ok
	case msg.RenewReply:
		b, ok = appendKey(b, 1, v.Key)
		b = appendToken(b, 2, v.Token)
		b = appendUint(b, 3, uint64(v.Attempt))
		b = appendBool(b, 4, v.OK)
		return appendUint(b, 5, uint64(v.Lease)), ok
	case msg.Withdraw:
		b, ok = appendKey(b, 1, v.Key)
		return appendRequest(b, 2, v.Req), ok
	case msg.Renewal:
		return appendUint(b, 1, v.Nonce), true
	case msg.RenewalAnswer:
		b = appendUint(b, 1, v.Nonce)
		b = appendUint(b, 2, uint64(v.Result))
		b = appendUint(b, 3, v.Promised)
		return b, v.Result >= msg.RenewalOK && v.Result <= msg.RenewalUnknownEpoch
	}
	return b, false
}

// bodyField is the envelope's oneof field number of a body kind.
func bodyField(k msg.Kind) protowire.Number { return protowire.Number(20 + int(k)) }

// validString is what the generated code checks of a string field: within
// its bound and, as proto3 requires of strings, valid UTF-8.
func validString(s string, max int) bool { return len(s) <= max && utf8.ValidString(s) }

// beginNested reserves a nested message's length, one byte: messages here
// are nearly always shorter than 128 bytes. endNested writes the length of
// what was appended since, moving the message only when its length needs
// more bytes; at is the length of what beginNested returned.
func beginNested(b []byte) []byte { return append(b, 0) }

func endNested(b []byte, at int) []byte {
	n := len(b) - at
	if n < 0x80 {
		b[at-1] = byte(n)
		return b
	}
	size := protowire.SizeVarint(uint64(n))
	b = append(b, make([]byte, size-1)...)
	copy(b[at-1+size:], b[at:at+n])
	protowire.AppendVarint(b[:at-1], uint64(n))
	return b
}

// The field writers omit what proto3 omits: zero scalars, empty strings and
// byte strings, and absent (zero) messages.

func appendUint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
}

func appendBool(b []byte, num protowire.Number, v bool) []byte {
	if !v {
		return b
	}
	return append(protowire.AppendTag(b, num, protowire.VarintType), 1)
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), s)
}

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
}

// appendKey writes a lock key (bytes on the wire) and reports whether it is
// within its bound.
func appendKey(b []byte, num protowire.Number, k string) ([]byte, bool) {
	return appendString(b, num, k), len(k) <= MaxKeyLen
}

func appendRequest(b []byte, num protowire.Number, r msg.RequestID) []byte {
	if r == (msg.RequestID{}) {
		return b
	}
	at := beginNested(protowire.AppendTag(b, num, protowire.BytesType))
	return endNested(appendUint(appendUint(at, 1, r.Inc), 2, r.Seq), len(at))
}

// appendToken writes the three fields a token has on the wire. A token
// whose only non-zero field is Section is written as an empty message, as
// the generated code writes it.
func appendToken(b []byte, num protowire.Number, t fence.Token) []byte {
	if t.IsZero() {
		return b
	}
	at := beginNested(protowire.AppendTag(b, num, protowire.BytesType))
	return endNested(appendUint(appendUint(appendUint(at, 1, t.Epoch), 2, t.Incarnation), 3, t.Counter), len(at))
}

// wireReader reads one message's fields in the direct codec's plain form. Any
// deviation sets bad, after which every read returns zero values; the
// caller then leaves the message to the generated code.
type wireReader struct {
	b     []byte
	seen  uint64 // field numbers read so far, to decline a repeated one
	bad   bool
	names *names // nil: every name read is a new string
}

// names are the node IDs and the address a Decoder read last. The envelopes
// on one stream all name the same sender and receiver, so a name that matches
// is handed out again instead of allocated.
type names struct{ fromID, fromAddr, to string }

// next returns the next field's number, or 0 at the end or once bad. A field
// number outside 1..63, a malformed tag or a field seen before makes it bad.
func (r *wireReader) next() (protowire.Number, protowire.Type) {
	if r.bad || len(r.b) == 0 {
		return 0, 0
	}
	num, typ, n := protowire.ConsumeTag(r.b)
	if n < 0 || num >= 64 || r.seen&(1<<num) != 0 {
		r.bad = true
		return 0, 0
	}
	r.seen |= 1 << num
	r.b = r.b[n:]
	return num, typ
}

func (r *wireReader) uint(typ protowire.Type) uint64 {
	if r.bad || typ != protowire.VarintType {
		r.bad = true
		return 0
	}
	v, n := protowire.ConsumeVarint(r.b)
	if n < 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

// uint32 declines a value above 32 bits, which the generated code would
// truncate.
func (r *wireReader) uint32(typ protowire.Type) uint32 {
	v := r.uint(typ)
	if v > 1<<32-1 {
		r.bad = true
	}
	return uint32(v)
}

// enum reads an enum's value, declining one above max before it is
// narrowed to msg's uint8 enums.
func (r *wireReader) enum(typ protowire.Type, max uint64) uint8 {
	v := r.uint(typ)
	if v > max {
		r.bad = true
		return 0
	}
	return uint8(v)
}

func (r *wireReader) bool(typ protowire.Type) bool { return r.uint(typ) != 0 }

func (r *wireReader) duration(typ protowire.Type) time.Duration {
	return time.Duration(int64(r.uint(typ)))
}

// bytes returns a length-delimited field, aliasing the input.
func (r *wireReader) bytes(typ protowire.Type, max int) []byte {
	if r.bad || typ != protowire.BytesType {
		r.bad = true
		return nil
	}
	v, n := protowire.ConsumeBytes(r.b)
	if n < 0 || len(v) > max {
		r.bad = true
		return nil
	}
	r.b = r.b[n:]
	return v
}

// copied is bytes copied out of the input; empty is nil, as Decode returns.
func (r *wireReader) copied(typ protowire.Type, max int) []byte {
	v := r.bytes(typ, max)
	if len(v) == 0 {
		return nil
	}
	return append([]byte(nil), v...)
}

// string is a proto3 string field: valid UTF-8.
func (r *wireReader) string(typ protowire.Type, max int) string {
	v := r.bytes(typ, max)
	if !utf8.Valid(v) {
		r.bad = true
		return ""
	}
	return string(v)
}

// name is a string field holding a node ID or an address; last is where its
// Decoder keeps the one it read before (nil without a Decoder).
func (r *wireReader) name(typ protowire.Type, max int, last *string) string {
	if last == nil {
		return r.string(typ, max)
	}
	v := r.bytes(typ, max)
	if string(v) == *last {
		return *last
	}
	if !utf8.Valid(v) {
		r.bad = true
		return ""
	}
	*last = string(v)
	return *last
}

func (r *wireReader) key(typ protowire.Type) string { return string(r.bytes(typ, MaxKeyLen)) }

// nested returns a reader of a nested message; end folds its outcome back.
func (r *wireReader) nested(typ protowire.Type) wireReader {
	return wireReader{b: r.bytes(typ, MaxEnvelopeSize), bad: r.bad, names: r.names}
}

func (r *wireReader) end(inner *wireReader) { r.bad = r.bad || inner.bad }

// member reads the envelope's sender, the only member a direct kind carries.
func (r *wireReader) member(typ protowire.Type) (m msg.Member) {
	var lastID, lastAddr *string
	if r.names != nil {
		lastID, lastAddr = &r.names.fromID, &r.names.fromAddr
	}
	in := r.nested(typ)
	for num, typ := in.next(); num != 0; num, typ = in.next() {
		switch num {
		case 1:
			m.ID = msg.NodeID(in.name(typ, MaxIDLen, lastID))
		case 2:
			m.Store = in.uint(typ)
		case 3:
			m.Addr = in.name(typ, MaxAddrLen, lastAddr)
		case 4:
			m.Version = in.uint32(typ)
		default:
			in.bad = true
		}
	}
	r.end(&in)
	return m
}

func (r *wireReader) request(typ protowire.Type) (q msg.RequestID) {
	in := r.nested(typ)
	for num, typ := in.next(); num != 0; num, typ = in.next() {
		switch num {
		case 1:
			q.Inc = in.uint(typ)
		case 2:
			q.Seq = in.uint(typ)
		default:
			in.bad = true
		}
	}
	r.end(&in)
	return q
}

func (r *wireReader) token(typ protowire.Type) (t fence.Token) {
	in := r.nested(typ)
	for num, typ := in.next(); num != 0; num, typ = in.next() {
		switch num {
		case 1:
			t.Epoch = in.uint(typ)
		case 2:
			t.Incarnation = in.uint(typ)
		case 3:
			t.Counter = in.uint(typ)
		default:
			in.bad = true
		}
	}
	r.end(&in)
	return t
}

// decodeDirect decodes b if it is an envelope of a kind the direct codec
// reads, in plain form, that passes every check; ok is false otherwise, and
// Decode then reads b through the generated code.
func decodeDirect(b []byte, cache *names) (env msg.Envelope, ok bool) {
	var lastTo *string
	if cache != nil {
		lastTo = &cache.to
	}
	r := wireReader{b: b, names: cache}
	for num, typ := r.next(); num != 0; num, typ = r.next() {
		switch {
		case num == 1:
			env.From = r.member(typ)
		case num == 2:
			env.FromInc = r.uint(typ)
		case num == 3:
			env.To = msg.NodeID(r.name(typ, MaxIDLen, lastTo))
		case num == 4:
			env.Epoch = r.uint(typ)
		case num == 5:
			env.Digest = r.uint(typ)
		case num == 6:
			env.Version = r.uint32(typ)
		case num > 20 && env.Body == nil:
			in := r.nested(typ)
			env.Body = bodyDirect(&in, msg.Kind(num-20))
			r.end(&in)
		default:
			// Field numbers 7 to 20 are unknown; a second body is one
			// that protobuf would merge or let replace the first.
			r.bad = true
		}
	}
	if r.bad || env.Body == nil {
		return msg.Envelope{}, false
	}
	return env, true
}

// bodyDirect reads a body of kind k, or returns nil for a kind the direct
// codec leaves to the generated code (r is then bad too).
func bodyDirect(r *wireReader, k msg.Kind) msg.Body {
	var body msg.Body
	switch k {
	case msg.KindAcquire:
		var v msg.Acquire
		for num, typ := r.next(); num != 0; num, typ = r.next() {
			switch num {
			case 1:
				v.Key = r.key(typ)
			case 2:
				v.Req = r.request(typ)
			case 3:
				v.Attempt = r.uint32(typ)
			case 4:
				v.Lease = r.duration(typ)
			case 5:
				v.Queued = r.bool(typ)
			default:
				r.bad = true
			}
		}
		body = v
	case msg.KindGrant:
		var v msg.Grant
		for num, typ := r.next(); num != 0; num, typ = r.next() {
			switch num {
			case 1:
				v.Key = r.key(typ)
			case 2:
				v.Req = r.request(typ)
			case 3:
				v.Attempt = r.uint32(typ)
			case 4:
				v.Token = r.token(typ)
			case 5:
				v.Lease = r.duration(typ)
			case 6:
				v.Barrier = r.copied(typ, MaxBarrierLen)
			case 7:
				v.Recalled = r.bool(typ)
			case 8:
				v.Signed = r.copied(typ, MaxSignedLen)
			case 9:
				v.Contended = r.bool(typ)
			default:
				r.bad = true
			}
		}
		body = v
	case msg.KindWait:
		var v msg.Wait
		for num, typ := r.next(); num != 0; num, typ = r.next() {
			switch num {
			case 1:
				v.Key = r.key(typ)
			case 2:
				v.Req = r.request(typ)
			case 3:
				v.Attempt = r.uint32(typ)
			case 4:
				v.Reason = msg.WaitReason(r.enum(typ, uint64(msg.WaitLiveness)))
			default:
				r.bad = true
			}
		}
		body = v
	case msg.KindNotHome:
		var v msg.NotHome
		for num, typ := r.next(); num != 0; num, typ = r.next() {
			switch num {
			case 1:
				v.Key = r.key(typ)
			case 2:
				v.Req = r.request(typ)
			default:
				r.bad = true
			}
		}
		body = v
	case msg.KindRefused:
		var v msg.Refused
		for num, typ := r.next(); num != 0; num, typ = r.next() {
			switch num {
			case 1:
				v.Key = r.key(typ)
			case 2:
				v.Req = r.request(typ)
			case 3:
				v.Reason = msg.RefuseReason(r.enum(typ, uint64(msg.RefusedDuplicateID)))
			default:
				r.bad = true
			}
		}
		if v.Reason < msg.RefusedNotMember || v.Reason > msg.RefusedDuplicateID {
			r.bad = true
		}
		body = v
	case msg.KindRecall:
		var v msg.Recall
		for num, typ := r.next(); num != 0; num, typ = r.next() {
			switch num {
			case 1:
				v.Key = r.key(typ)
			case 2:
				v.Token = r.token(typ)
			default:
				r.bad = true
			}
		}
		body = v
	case msg.KindRelease:
		var v msg.Release
		for num, typ := r.next(); num != 0; num, typ = r.next() {
			switch num {
			case 1:
				v.Key = r.key(typ)
			case 2:
				v.Token = r.token(typ)
			case 3:
				v.Barrier = r.copied(typ, MaxBarrierLen)
			default:
				r.bad = true
			}
		}
		body = v
	case msg.KindRenew:
		var v msg.Renew
		for num, typ := r.next(); num != 0; num, typ = r.next() {
			switch num {
			case 1:
				v.Key = r.key(typ)
			case 2:
				v.Token = r.token(typ)
			case 3:
				v.Attempt = r.uint32(typ)
			case 4:
				v.Lease = r.duration(typ)
			default:
				r.bad = true
			}
		}
		body = v
	case msg.KindRenewReply:
		var v msg.RenewReply
		for num, typ := r.next(); num != 0; num, typ = r.next() {
			switch num {
			case 1:
				v.Key = r.key(typ)
			case 2:
				v.Token = r.token(typ)
			case 3:
				v.Attempt = r.uint32(typ)
			case 4:
				v.OK = r.bool(typ)
			case 5:
				v.Lease = r.duration(typ)
			default:
				r.bad = true
			}
		}
		body = v
	case msg.KindWithdraw:
		var v msg.Withdraw
		for num, typ := r.next(); num != 0; num, typ = r.next() {
			switch num {
			case 1:
				v.Key = r.key(typ)
			case 2:
				v.Req = r.request(typ)
			default:
				r.bad = true
			}
		}
		body = v
	case msg.KindRenewal:
		var v msg.Renewal
		for num, typ := r.next(); num != 0; num, typ = r.next() {
			switch num {
			case 1:
				v.Nonce = r.uint(typ)
			default:
				r.bad = true
			}
		}
		body = v
	case msg.KindRenewalAnswer:
		var v msg.RenewalAnswer
		for num, typ := r.next(); num != 0; num, typ = r.next() {
			switch num {
			case 1:
				v.Nonce = r.uint(typ)
			case 2:
				v.Result = msg.RenewalResult(r.enum(typ, uint64(msg.RenewalUnknownEpoch)))
			case 3:
				v.Promised = r.uint(typ)
			default:
				r.bad = true
			}
		}
		if v.Result < msg.RenewalOK || v.Result > msg.RenewalUnknownEpoch {
			r.bad = true
		}
		body = v
	default:
		r.bad = true
		return nil
	}
	return body
}
