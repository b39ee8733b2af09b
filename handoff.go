package homelock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/homelock/homelock/msg"
	"github.com/homelock/homelock/transport"
)

// Handing this node's home keys off, for Leave and for Close (a controlled
// shutdown, as Kafka's controlled.shutdown moves partition leadership away
// before a broker stops). The members agree an epoch without this node; its
// home recalls the delegations it granted, and each new home pulls Drained
// from it with the first Acquire of a moved key (DESIGN "The activation
// gate"), so the keys move without waiting EpochLease + Skew.

// errLastMember: the only member of an epoch cannot leave it.
var errLastMember = errors.New("this node is the only member")

// handOff asks the members to agree an epoch without this node, waits until
// it is learned, then until this node neither grants nor holds any
// delegation. what prefixes its errors ("leave"). stop, if set, is asked
// before each request to leave while this node is still a member: a non-empty
// answer ends the handoff with that reason (errHandOffStopped).
func (n *Node) handOff(ctx context.Context, what string, stop func() string) error {
	n.mu.Lock()
	n.member.leaving, n.member.wantJoin = true, false
	n.mu.Unlock()

	t := time.NewTicker(n.joinEvery())
	defer t.Stop()
	for {
		why := ""
		if stop != nil {
			why = stop()
		}
		n.mu.Lock()
		if !n.usable() {
			n.mu.Unlock()
			return fmt.Errorf("%w: %s", ErrClosed, what)
		}
		l, ok := n.core.Current()
		if ok && l.Epoch.Number >= 1 && !l.Epoch.Has(n.self) {
			if n.member.leftAt.IsZero() {
				n.member.leftAt = n.core.LearnedAt() // removed before we asked
			}
			n.mu.Unlock()
			break
		}
		if ok && l.Epoch.Number >= 1 && len(l.Epoch.Members) == 1 {
			n.mu.Unlock()
			return fmt.Errorf("homelock: %s: %w of epoch %d", what, errLastMember, l.Epoch.Number)
		}
		if why != "" {
			n.mu.Unlock()
			return fmt.Errorf("homelock: %s: %w: %s", what, errHandOffStopped, why)
		}
		now := n.clock.Now()
		n.apply(now, n.core.Leave(now))
		ch := n.epochCh
		n.mu.Unlock()
		select {
		case <-ctx.Done():
			return fmt.Errorf("homelock: %s: still a member: %w", what, ctx.Err())
		case <-ch:
		case <-t.C:
		}
	}
	// Handoff: wait until nothing is granted by or held at this node.
	tick := time.NewTicker(n.cfg.RetryInterval)
	defer tick.Stop()
	for {
		n.mu.Lock()
		busy := false
		if n.usable() {
			hs, ds := n.core.Stats()
			busy = hs.Live > 0 || ds.Held > 0
		}
		n.mu.Unlock()
		if !busy {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("homelock: %s: epoch left, handoff unfinished: %w", what, ctx.Err())
		case <-tick.C:
		}
	}
}

// errHandOffStopped: Close gave the handoff up before the epoch without this
// node was learned (a member stopped looking alive).
var errHandOffStopped = errors.New("handoff stopped")

// closeHandOff is Close's handoff of the keys this node is home for, and
// then its linger (see Close). A handoff skipped or given up on purpose is
// logged, not returned; one cut short by ctx is an error.
func (n *Node) closeHandOff(ctx context.Context) error {
	const what = "close: home keys not handed off"
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("homelock: %s: %w", what, err)
	}
	n.mu.Lock()
	left := !n.member.leftAt.IsZero() // Leave did it
	n.mu.Unlock()
	if !left {
		if why := n.handOffBlocker(); why != "" {
			n.log.Info("close: not handing home keys off", "why", why)
			return nil
		}
		begin := n.clock.Now()
		err := n.handOff(ctx, what, n.handOffBlocker)
		switch {
		case errors.Is(err, errLastMember), errors.Is(err, errHandOffStopped):
			n.log.Info("close: not handing home keys off", "why", err)
			return nil
		case err != nil:
			return err
		}
		n.log.Info("close: home keys handed off", "took", n.clock.Now().Sub(begin).Round(time.Millisecond))
	}
	n.mu.Lock()
	until := n.member.leftAt.Add(n.cfg.EpochLease + n.cfg.Skew)
	n.mu.Unlock()
	n.linger(ctx, until)
	return nil
}

// linger keeps the node serving (transport and timer running) until the boot
// clock reaches until or ctx ends: the new homes of its keys pull Drained from
// it with their first Acquire of each; once it is gone they wait their whole
// gate, learnedAt + EpochLease + Skew.
func (n *Node) linger(ctx context.Context, until time.Time) {
	d := until.Sub(n.clock.Now())
	if d <= 0 {
		return
	}
	n.log.Info("close: answering drain queries until the new homes' gates pass", "for", d.Round(time.Millisecond))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		n.log.Info("close: stopped answering drain queries early; keys not queried yet wait out their gate",
			"cut", until.Sub(n.clock.Now()).Round(time.Millisecond), "err", ctx.Err())
	}
}

// handOffBlocker says why Close must not hand this node's home keys off now,
// or "". Beyond being a member of an epoch of two or more, every other member
// must look alive in memberlist: leaving while one is down can leave an epoch
// whose majority is not alive ({n2, n3} with n3 dead agrees nothing ever
// again, not even n3's removal), whereas a node that stays a member restores
// that majority when it restarts.
func (n *Node) handOffBlocker() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.usable() {
		return "the node stopped"
	}
	l, ok := n.core.Current()
	e := l.Epoch
	switch {
	case !ok || e.Number == 0 || !e.Has(n.self):
		return "not a member of the learned epoch"
	case len(e.Members) < 2:
		return fmt.Sprintf("the only member of epoch %d", e.Number)
	}
	alive := make(map[msg.Member]bool)
	for _, p := range n.ml.Members() {
		if p.State == transport.PeerAlive {
			alive[msg.Member{ID: p.Meta.NodeID, Store: p.Meta.StoreID}] = true
		}
	}
	for _, m := range e.Members {
		if k := memberKey(m); k != memberKey(n.self) && !alive[k] {
			return fmt.Sprintf("member %s of epoch %d does not look alive in gossip; leaving could leave an epoch without a live majority", m.ID, e.Number)
		}
	}
	return ""
}
