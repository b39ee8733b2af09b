package homelock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Handing this node's home keys off, for Leave and for Close (a controlled
// shutdown, as Kafka's controlled.shutdown moves partition leadership away
// before a broker stops). The members agree an epoch without this node; its
// home recalls the delegations it granted, and each new home pulls Drained
// from it with the first Acquire of a moved key (docs/design.md, "The activation
// gate"), so the keys move without waiting EpochLease + Skew.

// errLastMember: the only member of an epoch cannot leave it.
var errLastMember = errors.New("this node is the only member")

// handOff asks the members to agree an epoch without this node (the core
// asks again until it learns one), waits until it is learned, then until
// this node neither grants nor holds any delegation. what prefixes its
// errors ("leave"). guarded (Close's handoff): handOffBlocker is asked
// before the request to leave and then every ten retry intervals while this
// node is still a member, and a reason ends the handoff (errHandOffStopped);
// the core sends no ask while there is one.
func (n *Node) handOff(ctx context.Context, what string, guarded bool) error {
	n.lockAll()
	if n.usable() {
		n.core.Leaving()
	}
	n.unlockAll()

	t := time.NewTicker(10 * n.cfg.RetryInterval) // as the core paces its asks
	defer t.Stop()
	asked := false
	for {
		why := ""
		if guarded {
			why = n.handOffBlocker()
		}
		n.lockAll()
		if !n.usable() {
			n.unlockAll()
			return fmt.Errorf("%w: %s", ErrClosed, what)
		}
		l, ok := n.core.Current()
		if ok && l.Epoch.Number >= 1 && !l.Epoch.Has(n.self) {
			n.unlockAll()
			break
		}
		if ok && l.Epoch.Number >= 1 && len(l.Epoch.Members) == 1 {
			n.unlockAll()
			return fmt.Errorf("homelock: %s: %w of epoch %d", what, errLastMember, l.Epoch.Number)
		}
		if why != "" {
			n.unlockAll()
			return fmt.Errorf("homelock: %s: %w: %s", what, errHandOffStopped, why)
		}
		if !asked {
			now := n.clock.Now()
			n.apply(now, n.core.Leave(now, guarded))
			asked = true
		}
		ch := n.epochCh
		n.unlockAll()
		select {
		case <-ctx.Done():
			return fmt.Errorf("homelock: %s: still a member: %w", what, ctx.Err())
		case <-ch:
		case <-t.C:
		}
	}
	// Handoff: wait until nothing is granted by or held at this node; only
	// a step of the machines can change that.
	for {
		n.lockAll()
		if !n.usable() || n.core.HandedOff() {
			n.unlockAll()
			return nil
		}
		step := n.nextStep()
		n.unlockAll()
		select {
		case <-ctx.Done():
			return fmt.Errorf("homelock: %s: epoch left, handoff unfinished: %w", what, ctx.Err())
		case <-step:
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
	n.lockAll()
	left := n.usable() && !n.core.LeftAt().IsZero() // Leave did it
	n.unlockAll()
	if !left {
		if why := n.handOffBlocker(); why != "" {
			n.log.Info("close: not handing home keys off", "why", why)
			return nil
		}
		begin := n.clock.Now()
		err := n.handOff(ctx, what, true)
		switch {
		case errors.Is(err, errLastMember), errors.Is(err, errHandOffStopped):
			n.log.Info("close: not handing home keys off", "why", err)
			return nil
		case err != nil:
			return err
		}
		n.log.Info("close: home keys handed off", "took", n.clock.Now().Sub(begin).Round(time.Millisecond))
	}
	n.lockAll()
	var until time.Time
	if n.usable() {
		until = n.core.LingerUntil()
	}
	n.unlockAll()
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
// or "" (the core decides, from memberlist's view now).
func (n *Node) handOffBlocker() string {
	n.lockAll()
	defer n.unlockAll()
	if !n.usable() {
		return "the node stopped"
	}
	n.core.Gossip(n.clock.Now(), n.gossipView(n.clock.Now()))
	return n.core.HandOffBlocker()
}
