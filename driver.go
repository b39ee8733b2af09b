package homelock

import (
	"errors"
	"fmt"
	"time"

	"github.com/homelock/homelock/delegation"
	"github.com/homelock/homelock/internal/core"
	"github.com/homelock/homelock/internal/deadline"
	"github.com/homelock/homelock/localstore"
	"github.com/homelock/homelock/msg"
	"github.com/homelock/homelock/transport"
)

// maxSleep bounds the timer goroutine's sleep, so that clock jumps, failure
// detection and join retries are looked at even when the machines have no
// deadline.
const maxSleep = 100 * time.Millisecond

// receive is the transport's Handler. It leaves env in the inbox and steps
// it only if no one holds the step locks; otherwise whoever holds them steps
// it before letting go (unlockAll), and receive returns at once, as
// transport.Handler asks: a slow step (a synced epoch write, a long burst)
// no longer holds up the stream the envelope came on, and a goroutine that
// already runs does the step instead of one more that wakes for it. Beyond
// inboxCap envelopes waiting, receive waits for the locks, as the
// transport's flow control expects of a receiver that cannot keep up.
func (n *Node) receive(env msg.Envelope) {
	if n.in.push(env) > inboxCap {
		n.in.full.Add(1)
		n.lockAll()
		n.unlockAll()
		return
	}
	n.drainIfFree()
}

// inboxCap is how many received envelopes may wait for a step before the
// transport's handler waits too.
const inboxCap = 4096

// drainIfFree steps the inbox's envelopes if the step locks are free; if
// they are not, their holder steps them before letting go.
func (n *Node) drainIfFree() {
	if n.in.waiting() && n.mu.TryLock() {
		n.lockShards()
		n.unlockAll()
	}
}

// drainInbox steps every envelope received, in the order received, one step
// each (all locks held). Envelopes received while the node cannot step are
// dropped: the sender retries.
func (n *Node) drainInbox() {
	for {
		batch := n.in.take()
		if len(batch) == 0 {
			return
		}
		if n.usable() {
			n.stepNow()
		}
		for _, env := range batch {
			if n.usable() {
				now := n.clock.Now()
				n.apply(now, n.core.Receive(now, env))
			}
		}
		n.in.giveBack(batch)
	}
}

// panicOnNestedStep makes apply panic on a step inside a step, where a
// running node logs it; the package's tests set it (TestMain).
var panicOnNestedStep bool

// apply carries out one step's Ready, then steps the follow-ups its events
// called for, each after the step before it was carried out, in the order
// called for (all locks held). A follow-up is never stepped inside the
// step that asked for it: the machines see one input at a time, and every
// Ready is carried out whole before the next step starts.
func (n *Node) apply(now time.Time, rd core.Ready) {
	if n.applying {
		// A step inside a step: the outer Ready's remaining events are
		// carried out after the inner one's, out of the order the machines
		// made them in. A bug, which the package's tests make a panic; a
		// running node logs it and carries the inner Ready out at once (its
		// messages are valid only until the next step).
		if panicOnNestedStep {
			panic("homelock: a step was applied inside another step")
		}
		n.log.Error("a step was applied inside another step; its outputs were carried out within the other's")
		n.carry(now, rd)
		return
	}
	n.applying = true
	n.carry(now, rd)
	for i := 0; i < len(n.followUps) && n.usable(); i++ {
		e := n.followUps[i]
		if e.Kind == delegation.Admitted { // its locker gave up as it was admitted
			if rd, ok := n.core.Unlock(now, e.Key, e.Locker); ok {
				n.carry(now, rd)
			}
			continue
		}
		// A hook the store does not have: done at once, the inherited
		// barrier passed on.
		n.carry(now, n.hookDone(now, e, e.Barrier, nil))
	}
	clear(n.followUps)
	n.followUps = n.followUps[:0]
	n.applying = false
}

// carry carries out one step's Ready, in the order the core requires: the
// durable writes synced first, then the messages, then the events (all
// locks held).
func (n *Node) carry(now time.Time, rd core.Ready) {
	if rd.HasWrites() {
		err := n.store.Commit(localstore.Writes{Acceptor: rd.Acceptor, Learned: rd.Learned, GatePassed: rd.GatePassed})
		if err != nil {
			// The machines believe these writes are durable; nothing that
			// depends on them may leave, now or later.
			n.fail(fmt.Errorf("commit: %w", err))
			return
		}
	}
	n.send(rd.Msgs)
	if rd.Learned != nil {
		n.noteEpoch()
	}
	n.carryMembership(now, rd)
	for _, e := range rd.Events {
		n.deliver(now, e)
	}
	n.rearm()
	n.stepped()
}

// nextStep is a channel closed after the next step the node applies, or
// when it fails or shuts down (mu held). Only a waiter makes one, so a step
// with nobody waiting costs a nil check.
func (n *Node) nextStep() <-chan struct{} {
	if n.stepCh == nil {
		n.stepCh = make(chan struct{})
	}
	return n.stepCh
}

// stepped wakes whoever waits for the next step (mu held).
func (n *Node) stepped() {
	if n.stepCh != nil {
		close(n.stepCh)
		n.stepCh = nil
	}
}

// send hands a step's messages to the transport, those for one peer as one
// batch (one stream frame), each peer's in the order the step made them
// (mu held). The transports copy what they are handed, so the batches'
// buffers are kept from step to step: a step allocates nothing here.
func (n *Node) send(msgs []core.Outgoing) {
	if n.batches == nil {
		n.batches = make(map[msg.NodeID]int)
	}
	peers := n.batchTo[:0]
	for _, o := range msgs {
		b, ok := n.batches[o.To.ID]
		if !ok {
			b = len(peers)
			n.batches[o.To.ID] = b
			peers = append(peers, o.To)
			if b == len(n.batch) {
				n.batch = append(n.batch, nil)
			}
			n.batch[b] = n.batch[b][:0]
		}
		n.batch[b] = append(n.batch[b], o.Env)
	}
	for b, to := range peers {
		if err := transport.SendAll(n.tr, to, n.batch[b]); err != nil && !errors.Is(err, transport.ErrClosed) {
			n.log.Warn("send failed", "to", to.ID, "kind", n.batch[b][0].Body.Kind(), "batch", len(n.batch[b]), "err", err)
		}
		clear(n.batch[b]) // the bodies, until the next step
		delete(n.batches, to.ID)
	}
	n.batchTo = peers
}

// fail stops the node after a store failure (mu held).
func (n *Node) fail(err error) {
	if n.failed != nil {
		return
	}
	n.failed = err
	stopped := fmt.Errorf("%w: %w", ErrStoreFailed, err)
	n.stopped.Store(&stopped)
	n.stepped()
	n.log.Error("store failed; the node stops taking part in the protocol and leaves gossip", "err", err)
	// Alive in gossip it would never be found down, and the keys it is home
	// for would wait for it until someone restarted it: gossip stops too,
	// without a Leave, so the others see what they would after a crash.
	if n.ml != nil {
		if err := n.ml.Close(); err != nil {
			n.log.Warn("store failed: stopping gossip", "err", err)
		}
	}
	for id, w := range n.waiters {
		delete(n.waiters, id)
		w.err = fmt.Errorf("%w: key %q: store failed: %v", ErrClosed, w.key, err)
		close(w.done)
	}
	n.revokeAll("the node's store failed: " + err.Error())
}

// revokeAll ends every admitted critical section as lost, for why (all
// locks held).
func (n *Node) revokeAll(why string) {
	for i := range n.shards {
		s := &n.shards[i]
		for j, h := range s.sections {
			if h != nil {
				s.sections[j] = nil
				h.end(why)
			}
		}
	}
}

// deliver hands one event to its locker or runs a store hook (mu held).
func (n *Node) deliver(now time.Time, e delegation.Event) {
	switch e.Kind {
	case delegation.Admitted:
		w := n.waiters[e.Locker]
		if w == nil {
			// The locker gave up (context ended) as it was admitted.
			n.followUps = append(n.followUps, e)
			return
		}
		delete(n.waiters, e.Locker)
		w.h = n.admitted(n.shardOf(e.Key), &e)
		close(w.done)
	case delegation.Extended:
		if h := n.shardOf(e.Key).section(e.Slot); h != nil && h.locker == e.Locker {
			h.expires.Store(bootNanos(e.Expires))
		}
	case delegation.Revoked:
		s := n.shardOf(e.Key)
		if h := s.section(e.Slot); h != nil && h.locker == e.Locker {
			s.setSection(e.Slot, nil)
			h.end(e.Detail)
			n.log.Debug("lease lost", "key", e.Key, "token", e.Token, "detail", e.Detail)
		}
	case delegation.Failed:
		if w := n.waiters[e.Locker]; w != nil {
			delete(n.waiters, e.Locker)
			w.err = failure(e)
			close(w.done)
		}
	case delegation.Settle, delegation.WaitFresh:
		n.runHook(now, e)
	}
}

// admitted makes the Handle for an Admitted event of a key of s, on a
// section of a new generation (s's lock held).
func (n *Node) admitted(s *lockShard, e *delegation.Event) Handle {
	a := delegation.Admission{Slot: e.Slot, Token: e.Token, Expires: deadline.At(e.Expires), Signed: e.Signed}
	var h Handle
	n.admittedAt(s, e.Key, e.Locker, &a, &h)
	return h
}

// admittedAt is admitted for the repeat path's Admission, written into *h.
func (n *Node) admittedAt(s *lockShard, key string, locker uint64, a *delegation.Admission, h *Handle) {
	sec := s.take(n)
	sec.locker, sec.slot = locker, a.Slot
	// A section reused for the next admission under the same delegation
	// usually keeps its lease end (Handle.state reads it only while held):
	// the store, a full barrier, is skipped then.
	if exp := instantBootNanos(a.Expires); sec.expires.Load() != exp {
		sec.expires.Store(exp)
	}
	gen := sec.word.Load()>>stateBits + 1
	sec.word.Store(packWord(gen, stateHeld))
	s.setSection(a.Slot, sec)
	h.s, h.gen, h.key, h.token, h.signed, h.scope = sec, gen, key, a.Token, a.Signed, ScopeCluster
}

// failure maps a Failed event to the exported error it stands for.
func failure(e delegation.Event) error {
	var sentinel error
	switch e.Reason {
	case delegation.ReasonTimeout:
		sentinel = ErrTimeout
	case delegation.ReasonTooMany:
		sentinel = ErrTooManyDelegations
	case delegation.ReasonHookFailed:
		sentinel = ErrHookFailed
	case delegation.ReasonLeaseExpired:
		sentinel = ErrLeaseExpired
	default:
		sentinel = ErrLockUnavailable
	}
	detail := e.Detail
	if detail == "" {
		detail = "no detail"
	}
	return fmt.Errorf("%w: key %q: %s", sentinel, e.Key, detail)
}

// runHook runs the store's barrier or wait hook off the driver lock, bounded
// by the delegation's lease, and reports its completion tagged with the token
// (a completion for another token is dropped by the holder, H20). mu held.
func (n *Node) runHook(now time.Time, e delegation.Event) {
	settle := e.Kind == delegation.Settle
	if (settle && n.cfg.Barrier == nil) || (!settle && n.cfg.WaitFresh == nil) {
		n.followUps = append(n.followUps, e) // done at once: nothing to run
		return
	}
	n.startHook(hookRun{e: e, d: e.Deadline.Sub(now)})
}

// hookRun is one store hook to run: its event and how long it may take.
type hookRun struct {
	e delegation.Event
	d time.Duration
}

// hookIdle is how long a hook worker waits for the next hook before it
// exits.
const hookIdle = time.Second

// startHook hands r to an idle hook worker, or starts one (mu held). A
// handoff runs two hooks, and a goroutine per hook cost its creation and,
// as a store's hooks grow it, its stack again every time: kept workers
// keep theirs.
func (n *Node) startHook(r hookRun) {
	select {
	case n.hookQ <- r:
		return
	default:
	}
	n.hooks.Add(1)
	go n.hookWorker(r)
}

// hookWorker runs r, then the hooks handed to it until it has waited
// hookIdle for one or the node stops.
func (n *Node) hookWorker(r hookRun) {
	defer n.hooks.Done()
	idle := time.NewTimer(hookIdle)
	defer idle.Stop()
	for {
		n.runHookNow(r)
		idle.Reset(hookIdle)
		select {
		case r = <-n.hookQ:
		case <-idle.C:
			return
		case <-n.stop:
			return
		}
	}
}

// runHookNow runs one store hook, bounded by the delegation's lease, and
// reports its completion tagged with the token (a completion for another
// token is dropped by the holder, H20).
func (n *Node) runHookNow(r hookRun) {
	e := r.e
	settle := e.Kind == delegation.Settle
	ctx := newHookContext(n.hookCtx, r.d)
	defer ctx.cancel()
	var barrier []byte
	var err error
	if settle {
		barrier, err = n.cfg.Barrier(ctx, e.Key, e.Barrier)
	} else {
		err = n.cfg.WaitFresh(ctx, e.Key, e.Barrier)
	}
	if err != nil {
		n.log.Warn("store hook failed", "settle", settle, "key", e.Key, "token", e.Token, "err", err)
	}
	n.lockAll()
	defer n.unlockAll()
	if !n.usable() {
		return
	}
	now := n.stepNow()
	n.apply(now, n.hookDone(now, e, barrier, err))
}

// hookDone steps the completion of e's store hook (a Settle's barrier, or a
// WaitFresh) and returns its Ready (all locks held).
func (n *Node) hookDone(now time.Time, e delegation.Event, barrier []byte, err error) core.Ready {
	if e.Kind == delegation.Settle {
		return n.core.Settled(now, e.Key, e.Token, barrier, err)
	}
	return n.core.Fresh(now, e.Key, e.Token, err)
}

// rearm wakes the timer goroutine if the machines now want a tick before the
// one it sleeps towards (all locks held).
func (n *Node) rearm() { n.lowerArmed(deadline.At(n.core.NextDeadline())) }

// run is the timer goroutine: it sleeps until the machines' next deadline
// (or maxSleep) and ticks them.
func (n *Node) run() {
	defer n.wg.Done()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-n.kick:
		case <-t.C:
		}
		t.Reset(n.tick())
	}
}

// tick runs one timer step and returns how long to sleep.
func (n *Node) tick() time.Duration {
	n.lockAll()
	defer n.unlockAll()
	if !n.usable() {
		return maxSleep
	}
	now := n.stepNow()
	if d := n.core.NextDeadline(); !d.IsZero() && !now.Before(d) {
		n.apply(now, n.core.Tick(now))
	}
	if !n.usable() {
		return maxSleep
	}
	n.maintain(now)
	sleep := maxSleep
	if d := n.core.NextDeadline(); !d.IsZero() {
		sleep = min(max(d.Sub(now), 0), maxSleep)
	}
	n.armed.Store(armedAt(deadline.At(now.Add(sleep))))
	return sleep
}

// stepNow reads the lease clock for a step taken under the node's locks,
// between two readings of the wall clock, and lets the core judge whether
// wall time ran ahead of it (H9, core.ObserveClocks) before the step acts:
// after a resume, whichever step comes first (the timer's, a message's, a
// Lock's or Unlock's slow path, a hook's completion) drops what the jump
// voids, as the simulator, which judges the jump on resume, assumes. Only
// the repeat lock, which takes no step, may come before it.
func (n *Node) stepNow() time.Time {
	wallBefore := n.clock.Wall()
	now := n.clock.Now()
	n.checkJump(wallBefore, now)
	return now
}

// checkJump hands the core the wall readings on both sides of now, the
// lease clock's reading, and applies a jump it takes.
func (n *Node) checkJump(wallBefore, now time.Time) {
	r, ahead := n.core.ObserveClocks(wallBefore, now, n.clock.Wall())
	if ahead > 0 {
		n.clockJumps.Add(1)
		n.log.Warn("wall clock jumped ahead of the lease clock; dropping held delegations", "ahead", ahead)
		n.apply(now, r)
	}
}
