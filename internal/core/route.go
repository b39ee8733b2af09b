package core

import (
	"time"

	"github.com/homelock/homelock/epoch"
	"github.com/homelock/homelock/internal/outbuf"
	"github.com/homelock/homelock/msg"
)

// maxLocalHops bounds the messages a node may deliver to itself in one step;
// the protocol needs a handful (Acquire, Grant, Release), never a loop.
const maxLocalHops = 64

// Receive handles one message from the network.
func (n *Node) Receive(now time.Time, env msg.Envelope) Ready {
	n.receive(now, env)
	return n.flush(now)
}

func (n *Node) receive(now time.Time, env msg.Envelope) {
	if env.Body == nil || (env.FromInc < n.minInc[memberKey(env.From)] && !n.cfg.Holder.Mutations.KeepsOldIncReplies()) {
		return
	}
	unproven := n.unprovenJoin(env)
	n.heardFrom(now, env, unproven)
	switch b := env.Body.(type) {
	case msg.Join:
		if n.duplicateJoin(b.Member) != "" {
			n.refuseDuplicate(env)
			return
		}
	case msg.Refused:
		if b.Reason == msg.RefusedDuplicateID {
			n.onDuplicateRefusal(env)
			return
		}
	}
	if env.From.Addr != "" && !n.impostor(env.From) {
		if k := memberKey(env.From); env.FromInc >= n.heardInc[k] {
			n.heardInc[k] = env.FromInc
			n.book[env.From.ID] = env.From
		}
	}
	kind := env.Body.Kind()
	if unproven {
		n.holdJoin(now, env) // once the book has its address
		return
	}
	if isEpochKind(kind) {
		n.stepEpoch(now, env)
		return
	}
	cur, _, known := n.ep.Current()
	switch {
	case !known:
		// Without an epoch we can neither serve nor judge; ask.
		n.nudge(now, env.From.ID, msg.EpochQuery{})
		if isRequest(kind) {
			return
		}
	case env.Epoch > cur.Epoch.Number:
		n.nudge(now, env.From.ID, msg.EpochQuery{})
		if isRequest(kind) {
			return
		}
	case env.Epoch < cur.Epoch.Number:
		n.nudge(now, env.From.ID, msg.Learn{Epoch: cur.Epoch, Cert: cur.Cert})
		if isRequest(kind) {
			return // H8: the side that is behind gets the epoch and nothing else
		}
	case env.Digest != n.curDigest:
		return // same number, another value: never act on it
	}
	n.dispatch(now, env)
}

// stepEpoch hands an epoch message to the epoch machine and the home the
// liveness that results.
func (n *Node) stepEpoch(now time.Time, env msg.Envelope) {
	n.observe(env, false)
	n.absorbEpoch(now, n.ep.Step(now, env))
	n.home.SetLiveness(now, n.ep.LiveUntil())
}

func (n *Node) dispatch(now time.Time, env msg.Envelope) {
	n.observe(env, false)
	switch b := env.Body.(type) {
	case msg.Acquire:
		n.home.Acquire(now, env, b)
	case msg.Release:
		n.home.Release(now, b)
	case msg.Renew:
		n.home.Renew(now, env, b)
	case msg.Withdraw:
		n.home.Withdraw(now, env, b)
	case msg.DrainQuery:
		n.home.DrainQuery(now, env, b)
	case msg.Drained:
		n.home.Drained(now, env, b)
	case msg.GateRemaining:
		n.home.GateRemaining(now, b)
	case msg.ReclaimAnswer:
		n.home.ReclaimAnswer(now, env, b)
	case msg.Grant:
		n.holder.Grant(now, env, b)
	case msg.Wait:
		n.holder.Wait(now, b)
	case msg.NotHome:
		n.holder.NotHome(now, env, b)
	case msg.Refused:
		n.holder.Refused(now, env, b)
	case msg.Recall:
		n.holder.Recall(now, env, b)
	case msg.RenewReply:
		n.holder.RenewReply(now, env, b)
	case msg.Reclaim:
		// From now on nothing from its older incarnations counts (H1, H11).
		if k := memberKey(env.From); env.FromInc > n.minInc[k] {
			n.minInc[k] = env.FromInc
		}
		n.holder.Reclaim(now, env)
		n.home.HolderRestarted(now, env.From, env.FromInc)
	}
}

func isEpochKind(k msg.Kind) bool {
	switch k {
	case msg.KindPrepare, msg.KindPromise, msg.KindAccept, msg.KindAccepted, msg.KindLearn,
		msg.KindEpochQuery, msg.KindRenewal, msg.KindRenewalAnswer, msg.KindJoin, msg.KindLeave:
		return true
	}
	return false
}

// isRequest: kinds whose sender must share our epoch before we act.
func isRequest(k msg.Kind) bool {
	return k == msg.KindAcquire || k == msg.KindRenew || k == msg.KindDrainQuery
}

// nudge sends an epoch exchange message to a peer at most once per retry
// interval, so a lagging peer is told without a storm.
func (n *Node) nudge(now time.Time, to msg.NodeID, body msg.Body) {
	if t, ok := n.nudged[to]; ok && now.Sub(t) < n.cfg.Holder.RetryInterval {
		return
	}
	n.nudged[to] = now
	n.push(msg.Envelope{To: to, Body: body})
}

// absorbEpoch takes an epoch step's output: writes first in Ready, then, if a
// new epoch was learned, tell the home and the holder within the same step
// (the driver syncs Learned before anything this step produced leaves).
func (n *Node) absorbEpoch(now time.Time, o epoch.Output) {
	n.rd.Acceptor = append(n.rd.Acceptor, o.Acceptor...)
	if o.Learned != nil {
		n.rd.Learned = o.Learned
		n.curNumber, n.curDigest = o.Learned.Epoch.Number, o.Learned.Epoch.Digest()
		n.noteEpochs(*o.Learned)
	}
	n.local = append(n.local, o.Msgs...)
	if o.NewEpoch && o.Learned != nil {
		// The old epoch's liveness is gone (E2): the home must not act on
		// the new epoch under it, not even within this step.
		n.home.SetLiveness(now, n.ep.LiveUntil())
		n.home.OnEpoch(now, *o.Learned)
		n.holder.OnEpoch(now, o.Learned.Epoch)
		n.onLearned()
	}
}

// impostor reports whether from claims the node ID of a member of the
// current epoch with another store that looks alive: its address must not
// replace the member's in the book (messages to the member would go to it).
func (n *Node) impostor(from msg.Member) bool {
	l, _, ok := n.ep.Current()
	if !ok {
		return false
	}
	cur, in := l.Epoch.Member(from.ID)
	return in && cur.Store != from.Store && (cur.Same(n.cfg.Self) || n.mem.alive(cur))
}

func (n *Node) push(env msg.Envelope) { n.local = append(n.local, env) }

// flush collects the machines' outputs, delivers what is addressed to this
// node within the step, stamps headers and resolves addresses.
func (n *Node) flush(now time.Time) Ready {
	for hops := 0; ; hops++ {
		h := n.home.Ready()
		n.local = append(n.local, h.Msgs...)
		n.rd.GatePassed = append(n.rd.GatePassed, h.GatePassed...)
		d := n.holder.Ready()
		n.local = append(n.local, d.Msgs...)
		n.rd.Events = append(n.rd.Events, d.Events...)
		if len(n.local) == 0 {
			break
		}
		// Two buffers take turns: what this batch delivers locally goes to
		// the other, and a step allocates no queue of its own.
		batch := n.local
		n.local = n.spare[:0]
		if n.rd.Msgs == nil {
			n.rd.Msgs = make([]Outgoing, 0, len(batch))
		}
		for _, env := range batch {
			n.stamp(&env)
			n.observe(env, true)
			if env.To == n.cfg.Self.ID && hops < maxLocalHops {
				n.receive(now, env)
				continue
			}
			to, ok := n.book[env.To]
			if !ok {
				n.rd.Undeliverable++
				continue
			}
			n.rd.Msgs = append(n.rd.Msgs, Outgoing{To: to, Env: env})
		}
		clear(batch)
		n.spare = batch[:0]
	}
	rd := n.rd
	n.rd = Ready{}
	n.rd.Msgs = outbuf.Keep(&n.kept, rd.Msgs)
	return rd
}

func (n *Node) observe(env msg.Envelope, sent bool) {
	if n.cfg.Observe != nil {
		n.cfg.Observe(env, sent)
	}
}

func (n *Node) stamp(env *msg.Envelope) {
	env.From = n.cfg.Self
	env.FromInc = n.cfg.Inc
	env.Version = n.cfg.Self.Version
	env.Epoch, env.Digest = n.curNumber, n.curDigest
}
