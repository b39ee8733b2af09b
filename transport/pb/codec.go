package pb

import (
	"bytes"
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/msg"
)

// Encode returns the wire form of env. It refuses what Decode would refuse
// (an unknown body, an out-of-range enum, a field over its bound), so that a
// sender finds its own bug instead of every receiver dropping the message.
func Encode(env msg.Envelope) ([]byte, error) {
	// Appending to nil would grow the slice several times over; encoding
	// into a scratch buffer and copying out allocates once, at the size.
	scratch := encodeScratch.Get().(*[]byte)
	defer encodeScratch.Put(scratch)
	b, err := AppendEncode((*scratch)[:0], env)
	if cap(b) <= maxScratch {
		*scratch = b[:0]
	}
	if err != nil {
		return nil, err
	}
	return bytes.Clone(b), nil
}

// maxScratch bounds the scratch buffers Encode keeps: the rare large
// envelope (an epoch of many members) is not worth holding on to.
const maxScratch = 16 << 10

var encodeScratch = sync.Pool{New: func() any { return new([]byte) }}

// AppendEncode appends the wire form of env to b.
func AppendEncode(b []byte, env msg.Envelope) ([]byte, error) {
	// The direct codec's messages are far below MaxEnvelopeSize: their
	// variable fields are all bounded.
	if out, ok := appendDirect(b, env); ok {
		return out, nil
	}
	return appendGenerated(b, env)
}

// appendGenerated is AppendEncode through the generated code: every kind,
// and the errors.
func appendGenerated(b []byte, env msg.Envelope) ([]byte, error) {
	p, err := ToProto(env)
	if err != nil {
		return b, err
	}
	n := len(b)
	b, err = proto.MarshalOptions{}.MarshalAppend(b, p)
	if err != nil {
		return b[:n], fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if len(b)-n > MaxEnvelopeSize {
		return b[:n], fmt.Errorf("%w: %s envelope of %d bytes exceeds %d", ErrMessageTooLarge, env.Body.Kind(), len(b)-n, MaxEnvelopeSize)
	}
	return b, nil
}

// Decode parses one envelope. It never panics, and it refuses rather than
// guesses: see the errors in errors.go. Empty byte strings and lists decode as
// nil, so a message whose slices are empty but not nil does not round-trip
// with reflect.DeepEqual; every other value does.
func Decode(b []byte) (msg.Envelope, error) {
	return decode(b, nil)
}

// A Decoder decodes the envelopes of one stream, from one sender: the names
// every envelope repeats (the sender's ID and address, the receiver's ID) are
// allocated once, not per envelope. It accepts, refuses and returns exactly
// what Decode does. It is not safe for concurrent use.
type Decoder struct{ names names }

// Decode is Decode.
func (d *Decoder) Decode(b []byte) (msg.Envelope, error) { return decode(b, &d.names) }

func decode(b []byte, cache *names) (msg.Envelope, error) {
	if len(b) > MaxEnvelopeSize {
		return msg.Envelope{}, fmt.Errorf("%w: envelope of %d bytes exceeds %d", ErrMessageTooLarge, len(b), MaxEnvelopeSize)
	}
	if env, ok := decodeDirect(b, cache); ok {
		return env, nil
	}
	return decodeGenerated(b)
}

// decodeGenerated is Decode through the generated code: every kind and form,
// and the errors.
func decodeGenerated(b []byte) (msg.Envelope, error) {
	var p Envelope
	if err := proto.Unmarshal(b, &p); err != nil {
		return msg.Envelope{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return FromProto(&p)
}

// FromProto converts a decoded protobuf envelope, with the same checks as Decode.
func FromProto(p *Envelope) (msg.Envelope, error) {
	if p.GetBody() == nil {
		if len(p.ProtoReflect().GetUnknown()) > 0 {
			return msg.Envelope{}, fmt.Errorf("%w: body is a kind this version does not know", ErrUnknownMessage)
		}
		return msg.Envelope{}, fmt.Errorf("%w: envelope has no body", ErrUnknownMessage)
	}
	var c checker
	known(&c, p)
	env := msg.Envelope{
		From:    c.memberFrom("from", p.From),
		FromInc: p.FromInc,
		To:      msg.NodeID(c.str("to", p.To, MaxIDLen)),
		Epoch:   p.Epoch,
		Digest:  p.Digest,
		Version: p.Version,
		Body:    c.bodyFrom(p),
	}
	if c.err != nil {
		return msg.Envelope{}, c.err
	}
	return env, nil
}

// ToProto converts env, with the same checks as Encode.
func ToProto(env msg.Envelope) (*Envelope, error) {
	var c checker
	p := &Envelope{
		From:    c.memberTo("from", env.From),
		FromInc: env.FromInc,
		To:      c.str("to", string(env.To), MaxIDLen),
		Epoch:   env.Epoch,
		Digest:  env.Digest,
		Version: env.Version,
	}
	c.bodyTo(p, env.Body)
	if c.err != nil {
		return nil, c.err
	}
	return p, nil
}

// known refuses a message that carries fields this version does not know.
// The converters call it on every message they read, which costs a fraction
// of a reflective walk over the tree (the fuzz test keeps such a walk as its
// oracle).
func known[M interface {
	*E
	proto.Message
}, E any](c *checker, m M) {
	if m != nil && len(m.ProtoReflect().GetUnknown()) > 0 {
		c.fail(ErrUnknownField, "in %s", m.ProtoReflect().Descriptor().Name())
	}
}

// checker converts field by field and keeps the first violation, so the
// conversion code reads as a plain mapping.
type checker struct{ err error }

func (c *checker) fail(sentinel error, format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)
	}
}

func (c *checker) str(what, s string, max int) string {
	if len(s) > max {
		c.fail(ErrMessageTooLarge, "%s has %d bytes, limit %d", what, len(s), max)
	}
	return s
}

// keyTo and keyFrom carry lock keys as bytes: a database key need not be UTF-8.
func (c *checker) keyTo(k string) []byte {
	c.str("key", k, MaxKeyLen)
	if k == "" {
		return nil
	}
	return []byte(k)
}

func (c *checker) keyFrom(b []byte) string {
	if len(b) > MaxKeyLen {
		c.fail(ErrMessageTooLarge, "key has %d bytes, limit %d", len(b), MaxKeyLen)
	}
	return string(b)
}

// bytes bounds an opaque byte field; empty decodes as nil.
func (c *checker) bytes(what string, b []byte, max int) []byte {
	if len(b) > max {
		c.fail(ErrMessageTooLarge, "%s has %d bytes, limit %d", what, len(b), max)
	}
	if len(b) == 0 {
		return nil
	}
	return b
}

func (c *checker) count(what string, n, max int) {
	if n > max {
		c.fail(ErrMessageTooLarge, "%s has %d entries, limit %d", what, n, max)
	}
}

func (c *checker) memberTo(what string, m msg.Member) *Member {
	if m == (msg.Member{}) {
		return nil
	}
	return &Member{
		Id:      c.str(what+".id", string(m.ID), MaxIDLen),
		Store:   m.Store,
		Addr:    c.str(what+".addr", m.Addr, MaxAddrLen),
		Version: m.Version,
	}
}

func (c *checker) memberFrom(what string, p *Member) msg.Member {
	if p == nil {
		return msg.Member{}
	}
	known(c, p)
	return msg.Member{
		ID:      msg.NodeID(c.str(what+".id", p.Id, MaxIDLen)),
		Store:   p.Store,
		Addr:    c.str(what+".addr", p.Addr, MaxAddrLen),
		Version: p.Version,
	}
}

func (c *checker) membersTo(what string, ms []msg.Member) []*Member {
	c.count(what, len(ms), MaxMembers)
	if len(ms) == 0 || c.err != nil {
		return nil
	}
	out := make([]*Member, len(ms))
	for i, m := range ms {
		out[i] = c.memberTo(what, m)
		if out[i] == nil {
			// A zero member inside a list must survive as an element.
			out[i] = &Member{}
		}
	}
	return out
}

func (c *checker) membersFrom(what string, ps []*Member) []msg.Member {
	c.count(what, len(ps), MaxMembers)
	if len(ps) == 0 || c.err != nil {
		return nil
	}
	out := make([]msg.Member, len(ps))
	for i, p := range ps {
		out[i] = c.memberFrom(what, p)
	}
	return out
}

func ballotTo(b msg.Ballot, c *checker) *Ballot {
	if b.IsZero() {
		return nil
	}
	return &Ballot{Counter: b.Counter, Node: c.str("ballot.node", string(b.Node), MaxIDLen)}
}

func ballotFrom(p *Ballot, c *checker) msg.Ballot {
	if p == nil {
		return msg.Ballot{}
	}
	known(c, p)
	return msg.Ballot{Counter: p.Counter, Node: msg.NodeID(c.str("ballot.node", p.Node, MaxIDLen))}
}

func (c *checker) epochTo(e msg.Epoch) *Epoch {
	return &Epoch{Number: e.Number, Members: c.membersTo("epoch.members", e.Members), Ring: e.Caps.Ring}
}

func (c *checker) epochFrom(p *Epoch) msg.Epoch {
	if p == nil {
		return msg.Epoch{}
	}
	known(c, p)
	return msg.Epoch{Number: p.Number, Members: c.membersFrom("epoch.members", p.Members), Caps: msg.Caps{Ring: p.Ring}}
}

func (c *checker) certTo(x msg.Certificate) *Certificate {
	return &Certificate{
		Ballot:    ballotTo(x.Ballot, c),
		Acceptors: c.membersTo("cert.acceptors", x.Acceptors),
		Prev:      c.epochTo(x.Prev),
	}
}

func (c *checker) certFrom(p *Certificate) msg.Certificate {
	if p == nil {
		return msg.Certificate{}
	}
	known(c, p)
	return msg.Certificate{
		Ballot:    ballotFrom(p.Ballot, c),
		Acceptors: c.membersFrom("cert.acceptors", p.Acceptors),
		Prev:      c.epochFrom(p.Prev),
	}
}

func tokenTo(t fence.Token) *Token {
	if t.IsZero() {
		return nil
	}
	return &Token{Epoch: t.Epoch, Incarnation: t.Incarnation, Counter: t.Counter}
}

func tokenFrom(p *Token, c *checker) fence.Token {
	if p == nil {
		return fence.Token{}
	}
	known(c, p)
	return fence.Token{Epoch: p.Epoch, Incarnation: p.Incarnation, Counter: p.Counter}
}

func (c *checker) handedOverTo(h *msg.HandedOver) *HandedOver {
	if h == nil {
		return nil
	}
	if h.Token.IsZero() || h.Holder.ID == "" {
		c.fail(ErrMalformed, "drained.live needs a token and a holder")
	}
	return &HandedOver{Token: tokenTo(h.Token), Holder: c.memberTo("live.holder", h.Holder), HolderInc: h.HolderInc,
		LeaseNanos: int64(h.Lease), RemainingNanos: int64(h.Remaining)}
}

// handedOverFrom refuses a handed-over delegation without a token or a
// holder: the new home would record a delegation nobody can renew or
// release.
func (c *checker) handedOverFrom(p *HandedOver) *msg.HandedOver {
	if p == nil {
		return nil
	}
	known(c, p)
	h := &msg.HandedOver{Token: tokenFrom(p.Token, c), Holder: c.memberFrom("live.holder", p.Holder), HolderInc: p.HolderInc,
		Lease: time.Duration(p.LeaseNanos), Remaining: time.Duration(p.RemainingNanos)}
	if h.Token.IsZero() || h.Holder.ID == "" {
		c.fail(ErrMalformed, "drained.live needs a token and a holder")
	}
	return h
}

func reqTo(r msg.RequestID) *RequestID {
	if r == (msg.RequestID{}) {
		return nil
	}
	return &RequestID{Inc: r.Inc, Seq: r.Seq}
}

func reqFrom(p *RequestID, c *checker) msg.RequestID {
	if p == nil {
		return msg.RequestID{}
	}
	known(c, p)
	return msg.RequestID{Inc: p.Inc, Seq: p.Seq}
}

func (c *checker) renewalResult(r msg.RenewalResult) msg.RenewalResult {
	if r < msg.RenewalOK || r > msg.RenewalUnknownEpoch {
		c.fail(ErrBadEnum, "renewal result %d", r)
	}
	return r
}

func (c *checker) refuseReason(r msg.RefuseReason) msg.RefuseReason {
	if r < msg.RefusedNotMember || r > msg.RefusedDuplicateID {
		c.fail(ErrBadEnum, "refusal reason %d", r)
	}
	return r
}

// waitReason accepts the known reasons and none (0: the home did not say).
func (c *checker) waitReason(r msg.WaitReason) msg.WaitReason {
	if r > msg.WaitLiveness {
		c.fail(ErrBadEnum, "wait reason %d", r)
	}
	return r
}

// enumFrom narrows a wire enum to msg's uint8 enums without wrapping a large
// value into range.
func enumFrom[T ~uint8](c *checker, what string, v int32) T {
	if v < 0 || v > 255 {
		c.fail(ErrBadEnum, "%s %d", what, v)
		return 0
	}
	return T(v)
}

func (c *checker) bodyTo(p *Envelope, body msg.Body) {
	switch b := body.(type) {
	case msg.Prepare:
		p.Body = &Envelope_Prepare{Prepare: &Prepare{Instance: b.Instance, Ballot: ballotTo(b.Ballot, c)}}
	case msg.Promise:
		q := &Promise{
			Instance: b.Instance, Ballot: ballotTo(b.Ballot, c), Ok: b.OK,
			Promised: ballotTo(b.Promised, c), Accepted: ballotTo(b.Accepted, c),
		}
		if b.Value != nil {
			q.Value = c.epochTo(*b.Value)
		}
		p.Body = &Envelope_Promise{Promise: q}
	case msg.Accept:
		p.Body = &Envelope_Accept{Accept: &Accept{Instance: b.Instance, Ballot: ballotTo(b.Ballot, c), Value: c.epochTo(b.Value)}}
	case msg.Accepted:
		p.Body = &Envelope_Accepted{Accepted: &Accepted{Instance: b.Instance, Ballot: ballotTo(b.Ballot, c), Ok: b.OK, Promised: ballotTo(b.Promised, c)}}
	case msg.Learn:
		p.Body = &Envelope_Learn{Learn: &Learn{Epoch: c.epochTo(b.Epoch), Cert: c.certTo(b.Cert)}}
	case msg.EpochQuery:
		p.Body = &Envelope_EpochQuery{EpochQuery: &EpochQuery{}}
	case msg.Renewal:
		p.Body = &Envelope_Renewal{Renewal: &Renewal{Nonce: b.Nonce}}
	case msg.RenewalAnswer:
		p.Body = &Envelope_RenewalAnswer{RenewalAnswer: &RenewalAnswer{Nonce: b.Nonce, Result: RenewalResult(c.renewalResult(b.Result)), Promised: b.Promised}}
	case msg.Join:
		p.Body = &Envelope_Join{Join: &Join{Member: c.memberTo("join.member", b.Member)}}
	case msg.Leave:
		p.Body = &Envelope_Leave{Leave: &Leave{Member: c.memberTo("leave.member", b.Member)}}
	case msg.Acquire:
		p.Body = &Envelope_Acquire{Acquire: &Acquire{Key: c.keyTo(b.Key), Req: reqTo(b.Req), Attempt: b.Attempt, LeaseNanos: int64(b.Lease), Queued: b.Queued}}
	case msg.Grant:
		p.Body = &Envelope_Grant{Grant: &Grant{
			Key: c.keyTo(b.Key), Req: reqTo(b.Req), Attempt: b.Attempt, Token: tokenTo(b.Token),
			LeaseNanos: int64(b.Lease), Barrier: c.bytes("barrier", b.Barrier, MaxBarrierLen),
			Recalled: b.Recalled, Signed: c.bytes("signed grant", b.Signed, MaxSignedLen),
			Contended: b.Contended,
		}}
	case msg.Wait:
		p.Body = &Envelope_Wait{Wait: &Wait{Key: c.keyTo(b.Key), Req: reqTo(b.Req), Attempt: b.Attempt, Reason: WaitReason(c.waitReason(b.Reason))}}
	case msg.NotHome:
		p.Body = &Envelope_NotHome{NotHome: &NotHome{Key: c.keyTo(b.Key), Req: reqTo(b.Req)}}
	case msg.Refused:
		p.Body = &Envelope_Refused{Refused: &Refused{Key: c.keyTo(b.Key), Req: reqTo(b.Req), Reason: RefuseReason(c.refuseReason(b.Reason))}}
	case msg.Recall:
		p.Body = &Envelope_Recall{Recall: &Recall{Key: c.keyTo(b.Key), Token: tokenTo(b.Token)}}
	case msg.Release:
		p.Body = &Envelope_Release{Release: &Release{Key: c.keyTo(b.Key), Token: tokenTo(b.Token), Barrier: c.bytes("barrier", b.Barrier, MaxBarrierLen)}}
	case msg.Renew:
		p.Body = &Envelope_Renew{Renew: &Renew{Key: c.keyTo(b.Key), Token: tokenTo(b.Token), Attempt: b.Attempt, LeaseNanos: int64(b.Lease)}}
	case msg.RenewReply:
		p.Body = &Envelope_RenewReply{RenewReply: &RenewReply{Key: c.keyTo(b.Key), Token: tokenTo(b.Token), Attempt: b.Attempt, Ok: b.OK, LeaseNanos: int64(b.Lease)}}
	case msg.Withdraw:
		p.Body = &Envelope_Withdraw{Withdraw: &Withdraw{Key: c.keyTo(b.Key), Req: reqTo(b.Req)}}
	case msg.Reclaim:
		p.Body = &Envelope_Reclaim{Reclaim: &Reclaim{}}
	case msg.ReclaimAnswer:
		c.count("reclaim answer", len(b.Held), MaxHeld)
		q := &ReclaimAnswer{ForInc: b.ForInc}
		if c.err == nil && len(b.Held) > 0 {
			q.Held = make([]*HeldDelegation, len(b.Held))
			for i, h := range b.Held {
				q.Held[i] = &HeldDelegation{Key: c.keyTo(h.Key), Token: tokenTo(h.Token), RemainingNanos: int64(h.Remaining), Barrier: c.bytes("barrier", h.Barrier, MaxBarrierLen)}
			}
		}
		p.Body = &Envelope_ReclaimAnswer{ReclaimAnswer: q}
	case msg.DrainQuery:
		p.Body = &Envelope_DrainQuery{DrainQuery: &DrainQuery{Key: c.keyTo(b.Key), From: b.From, To: b.To, ReceiverInc: b.ReceiverInc}}
	case msg.Drained:
		p.Body = &Envelope_Drained{Drained: &Drained{Key: c.keyTo(b.Key), From: b.From, To: b.To, ReceiverInc: b.ReceiverInc, Barrier: c.bytes("barrier", b.Barrier, MaxBarrierLen), Live: c.handedOverTo(b.Live)}}
	case msg.GateRemaining:
		p.Body = &Envelope_GateRemaining{GateRemaining: &GateRemaining{Key: c.keyTo(b.Key), From: b.From, To: b.To, ReceiverInc: b.ReceiverInc, RemainingNanos: int64(b.Remaining)}}
	case nil:
		c.fail(ErrUnknownMessage, "envelope has no body")
	default:
		// Pointers to bodies are refused too: Decode returns values, and a
		// pointer would not survive a round trip unchanged.
		c.fail(ErrUnknownMessage, "body type %T", body)
	}
}

func (c *checker) bodyFrom(p *Envelope) msg.Body {
	switch b := p.Body.(type) {
	case *Envelope_Prepare:
		q := b.Prepare
		known(c, q)
		return msg.Prepare{Instance: q.GetInstance(), Ballot: ballotFrom(q.GetBallot(), c)}
	case *Envelope_Promise:
		q := b.Promise
		known(c, q)
		out := msg.Promise{
			Instance: q.GetInstance(), Ballot: ballotFrom(q.GetBallot(), c), OK: q.GetOk(),
			Promised: ballotFrom(q.GetPromised(), c), Accepted: ballotFrom(q.GetAccepted(), c),
		}
		if q.GetValue() != nil {
			v := c.epochFrom(q.GetValue())
			out.Value = &v
		}
		return out
	case *Envelope_Accept:
		q := b.Accept
		known(c, q)
		return msg.Accept{Instance: q.GetInstance(), Ballot: ballotFrom(q.GetBallot(), c), Value: c.epochFrom(q.GetValue())}
	case *Envelope_Accepted:
		q := b.Accepted
		known(c, q)
		return msg.Accepted{Instance: q.GetInstance(), Ballot: ballotFrom(q.GetBallot(), c), OK: q.GetOk(), Promised: ballotFrom(q.GetPromised(), c)}
	case *Envelope_Learn:
		q := b.Learn
		known(c, q)
		return msg.Learn{Epoch: c.epochFrom(q.GetEpoch()), Cert: c.certFrom(q.GetCert())}
	case *Envelope_EpochQuery:
		known(c, b.EpochQuery)
		return msg.EpochQuery{}
	case *Envelope_Renewal:
		known(c, b.Renewal)
		return msg.Renewal{Nonce: b.Renewal.GetNonce()}
	case *Envelope_RenewalAnswer:
		q := b.RenewalAnswer
		known(c, q)
		return msg.RenewalAnswer{Nonce: q.GetNonce(), Result: c.renewalResult(enumFrom[msg.RenewalResult](c, "renewal result", int32(q.GetResult()))), Promised: q.GetPromised()}
	case *Envelope_Join:
		known(c, b.Join)
		return msg.Join{Member: c.memberFrom("join.member", b.Join.GetMember())}
	case *Envelope_Leave:
		known(c, b.Leave)
		return msg.Leave{Member: c.memberFrom("leave.member", b.Leave.GetMember())}
	case *Envelope_Acquire:
		q := b.Acquire
		known(c, q)
		return msg.Acquire{Key: c.keyFrom(q.GetKey()), Req: reqFrom(q.GetReq(), c), Attempt: q.GetAttempt(), Lease: time.Duration(q.GetLeaseNanos()), Queued: q.GetQueued()}
	case *Envelope_Grant:
		q := b.Grant
		known(c, q)
		return msg.Grant{
			Key: c.keyFrom(q.GetKey()), Req: reqFrom(q.GetReq(), c), Attempt: q.GetAttempt(), Token: tokenFrom(q.GetToken(), c),
			Lease: time.Duration(q.GetLeaseNanos()), Barrier: c.bytes("barrier", q.GetBarrier(), MaxBarrierLen),
			Recalled: q.GetRecalled(), Signed: c.bytes("signed grant", q.GetSigned(), MaxSignedLen),
			Contended: q.GetContended(),
		}
	case *Envelope_Wait:
		q := b.Wait
		known(c, q)
		return msg.Wait{Key: c.keyFrom(q.GetKey()), Req: reqFrom(q.GetReq(), c), Attempt: q.GetAttempt(),
			Reason: c.waitReason(enumFrom[msg.WaitReason](c, "wait reason", int32(q.GetReason())))}
	case *Envelope_NotHome:
		q := b.NotHome
		known(c, q)
		return msg.NotHome{Key: c.keyFrom(q.GetKey()), Req: reqFrom(q.GetReq(), c)}
	case *Envelope_Refused:
		q := b.Refused
		known(c, q)
		return msg.Refused{Key: c.keyFrom(q.GetKey()), Req: reqFrom(q.GetReq(), c), Reason: c.refuseReason(enumFrom[msg.RefuseReason](c, "refusal reason", int32(q.GetReason())))}
	case *Envelope_Recall:
		q := b.Recall
		known(c, q)
		return msg.Recall{Key: c.keyFrom(q.GetKey()), Token: tokenFrom(q.GetToken(), c)}
	case *Envelope_Release:
		q := b.Release
		known(c, q)
		return msg.Release{Key: c.keyFrom(q.GetKey()), Token: tokenFrom(q.GetToken(), c), Barrier: c.bytes("barrier", q.GetBarrier(), MaxBarrierLen)}
	case *Envelope_Renew:
		q := b.Renew
		known(c, q)
		return msg.Renew{Key: c.keyFrom(q.GetKey()), Token: tokenFrom(q.GetToken(), c), Attempt: q.GetAttempt(), Lease: time.Duration(q.GetLeaseNanos())}
	case *Envelope_RenewReply:
		q := b.RenewReply
		known(c, q)
		return msg.RenewReply{Key: c.keyFrom(q.GetKey()), Token: tokenFrom(q.GetToken(), c), Attempt: q.GetAttempt(), OK: q.GetOk(), Lease: time.Duration(q.GetLeaseNanos())}
	case *Envelope_Withdraw:
		q := b.Withdraw
		known(c, q)
		return msg.Withdraw{Key: c.keyFrom(q.GetKey()), Req: reqFrom(q.GetReq(), c)}
	case *Envelope_Reclaim:
		known(c, b.Reclaim)
		return msg.Reclaim{}
	case *Envelope_ReclaimAnswer:
		q := b.ReclaimAnswer
		known(c, q)
		out := msg.ReclaimAnswer{ForInc: q.GetForInc()}
		c.count("reclaim answer", len(q.GetHeld()), MaxHeld)
		if c.err == nil && len(q.GetHeld()) > 0 {
			out.Held = make([]msg.HeldDelegation, len(q.GetHeld()))
			for i, h := range q.GetHeld() {
				known(c, h)
				out.Held[i] = msg.HeldDelegation{Key: c.keyFrom(h.GetKey()), Token: tokenFrom(h.GetToken(), c), Remaining: time.Duration(h.GetRemainingNanos()), Barrier: c.bytes("barrier", h.GetBarrier(), MaxBarrierLen)}
			}
		}
		return out
	case *Envelope_DrainQuery:
		q := b.DrainQuery
		known(c, q)
		return msg.DrainQuery{Key: c.keyFrom(q.GetKey()), From: q.GetFrom(), To: q.GetTo(), ReceiverInc: q.GetReceiverInc()}
	case *Envelope_Drained:
		q := b.Drained
		known(c, q)
		return msg.Drained{Key: c.keyFrom(q.GetKey()), From: q.GetFrom(), To: q.GetTo(), ReceiverInc: q.GetReceiverInc(), Barrier: c.bytes("barrier", q.GetBarrier(), MaxBarrierLen), Live: c.handedOverFrom(q.GetLive())}
	case *Envelope_GateRemaining:
		q := b.GateRemaining
		known(c, q)
		return msg.GateRemaining{Key: c.keyFrom(q.GetKey()), From: q.GetFrom(), To: q.GetTo(), ReceiverInc: q.GetReceiverInc(), Remaining: time.Duration(q.GetRemainingNanos())}
	}
	c.fail(ErrUnknownMessage, "body %T", p.Body)
	return nil
}
