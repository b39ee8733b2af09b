package samples

import (
	"time"

	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/msg"
)

var (
	a = msg.Member{ID: "a", Store: 0xa1, Addr: "127.0.0.1:7001", Version: 1}
	b = msg.Member{ID: "b", Store: 0xb2, Addr: "127.0.0.1:7002", Version: 1}
	c = msg.Member{ID: "c", Store: 0xc3, Addr: "127.0.0.1:7003", Version: 1}

	epoch1 = msg.Epoch{Number: 1, Members: []msg.Member{a, b, c}, Caps: msg.Caps{Ring: msg.RingV1}}
	epoch2 = msg.Epoch{Number: 2, Members: []msg.Member{a, b}, Caps: msg.Caps{Ring: msg.RingV1}}
	ballot = msg.Ballot{Counter: 7, Node: "b"}
	token  = fence.Token{Epoch: 2, Incarnation: 5, Counter: 1 << 40}
	req    = msg.RequestID{Inc: 5, Seq: 99}
)

// Bodies returns one body of every kind, in msg.Kind order.
func Bodies() []msg.Body {
	return []msg.Body{
		msg.Prepare{Instance: 2, Ballot: ballot},
		msg.Promise{Instance: 2, Ballot: ballot, OK: true, Promised: ballot, Accepted: msg.Ballot{Counter: 3, Node: "a"}, Value: &epoch2},
		msg.Accept{Instance: 2, Ballot: ballot, Value: epoch2},
		msg.Accepted{Instance: 2, Ballot: ballot, OK: false, Promised: msg.Ballot{Counter: 9, Node: "c"}},
		msg.Learn{Epoch: epoch2, Cert: msg.Certificate{Ballot: ballot, Acceptors: []msg.Member{a, b}, Prev: epoch1}},
		msg.EpochQuery{},
		msg.Renewal{Nonce: 0xdeadbeef},
		msg.RenewalAnswer{Nonce: 0xdeadbeef, Result: msg.RenewalPromisedHigher, Promised: 3},
		msg.Join{Member: c},
		msg.Leave{Member: c},
		msg.Acquire{Key: "users/42", Req: req, Attempt: 3, Lease: 2 * time.Second, Queued: true},
		msg.Grant{Key: "users/42", Req: req, Attempt: 3, Token: token, Lease: 2 * time.Second, Barrier: []byte("pos:1234"), Recalled: true, Contended: true, Signed: []byte{1, 2, 3, 4}},
		msg.Wait{Key: "users/42", Req: req, Attempt: 4, Reason: msg.WaitHolder},
		msg.NotHome{Key: "users/42", Req: req},
		msg.Refused{Key: "users/42", Req: req, Reason: msg.RefusedTooManyDelegations},
		msg.Recall{Key: "users/42", Token: token},
		msg.Release{Key: "users/42", Token: token, Barrier: []byte("pos:1300")},
		msg.Renew{Key: "users/42", Token: token, Attempt: 2, Lease: time.Second},
		msg.RenewReply{Key: "users/42", Token: token, Attempt: 2, OK: true, Lease: 1500 * time.Millisecond},
		msg.Withdraw{Key: "users/42", Req: req},
		msg.Reclaim{},
		msg.ReclaimAnswer{ForInc: 6, Held: []msg.HeldDelegation{
			{Key: "users/42", Token: token, Remaining: 800 * time.Millisecond, Barrier: []byte("pos:1")},
			{Key: "\xff\x00binary key", Token: fence.Token{Epoch: 2, Incarnation: 5, Counter: 2}, Remaining: -time.Millisecond},
		}},
		msg.DrainQuery{Key: "users/42", From: 1, To: 2, ReceiverInc: 4},
		msg.Drained{Key: "users/42", From: 1, To: 2, ReceiverInc: 4, Barrier: []byte("pos:1400")},
		msg.Drained{Key: "users/42", From: 1, To: 2, ReceiverInc: 4, Barrier: []byte("pos:1400"), Live: &msg.HandedOver{
			Token: token, Holder: b, HolderInc: 3, Lease: 2 * time.Second, Remaining: 1700 * time.Millisecond}},
		msg.GateRemaining{Key: "users/42", From: 1, To: 2, ReceiverInc: 4, Remaining: 3 * time.Second},
	}
}

// Envelope wraps body in a header from a to b.
func Envelope(body msg.Body) msg.Envelope {
	return msg.Envelope{From: a, FromInc: 5, To: b.ID, Epoch: 2, Digest: epoch2.Digest(), Version: 1, Body: body}
}

// Envelopes returns Envelope of every body in Bodies.
func Envelopes() []msg.Envelope {
	var out []msg.Envelope
	for _, b := range Bodies() {
		out = append(out, Envelope(b))
	}
	return out
}
