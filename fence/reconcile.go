package fence

import (
	"context"
	"errors"
	"fmt"
)

// Outcome is what Reconcile found of an operation whose result was lost.
type Outcome uint8

const (
	// OutcomeNeverSeen: the resource holds no trace of the operation and
	// cannot yet prove it will never take effect: it has not accepted a
	// fence above the one the operation was sent under, or it is in shadow
	// mode, where a late copy would still commit. Not final.
	OutcomeNeverSeen Outcome = iota
	// OutcomeAccepted: the operation took effect; Reconciliation.Receipt
	// says under which fence and segment. Final.
	OutcomeAccepted
	// OutcomeRefused: the operation did not take effect and never will. It
	// has no receipt, and the resource, enforced, has accepted a fence above
	// the one it was sent under: a copy still in flight is refused when it
	// arrives (F1), whether or not one ever reached the resource. Final.
	OutcomeRefused
)

func (o Outcome) String() string {
	switch o {
	case OutcomeNeverSeen:
		return "never seen"
	case OutcomeAccepted:
		return "accepted"
	case OutcomeRefused:
		return "refused"
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// Reconciliation is Reconcile's answer.
type Reconciliation struct {
	Outcome Outcome
	// Receipt is the operation's receipt if it was accepted. A mutation a
	// shadow-mode resource committed although enforcement would have refused
	// it has no receipt; its Receipt then has WouldRefuse set, from the
	// shadow log.
	Receipt Receipt
	// Highest and Mode are the resource's when Reconcile answered.
	Highest Token
	Mode    Mode
}

// Reconcile answers what became of operation opID on resource, sent under
// fence sentUnder, after its commit result was lost (MUTATION_UNKNOWN): it
// was accepted (with its receipt), refused for good, or never seen. Like
// Receipt it waits for any Apply of the resource in progress, so the answer
// is never older than an acknowledgement already sent.
//
// sentUnder is compared with the resource's highest fence, so it must come
// from the lock domain the resource is bound to. An answer of NeverSeen
// becomes final only once the resource accepts a fence above sentUnder: a
// worker that takes over first writes under its new fence, then asks (see
// the package documentation, "Unknown outcomes"). An operation without a
// receipt sent under a fence below the one the resource's receipts were
// pruned below (Prune) is ErrPruned: its outcome is unknown for good.
func (g *Guard) Reconcile(ctx context.Context, resource, opID string, sentUnder Token) (Reconciliation, error) {
	switch {
	case len(resource) > MaxResourceLen || len(opID) > MaxNameLen:
		return Reconciliation{}, fmt.Errorf("%w: resource or operation ID over %d/%d bytes", ErrTooLarge, MaxResourceLen, MaxNameLen)
	case resource == "" || opID == "":
		return Reconciliation{}, fmt.Errorf("%w: empty resource or operation ID", ErrBadMutation)
	}
	s, err := g.lock(ctx, resource)
	if err != nil {
		return Reconciliation{}, err
	}
	defer s.unlock()
	e, err := g.entry(s, resource)
	if err != nil {
		return Reconciliation{}, err
	}
	mode, err := g.mode(e, resource)
	if err != nil {
		return Reconciliation{}, err
	}
	out := Reconciliation{Highest: e.st.Highest, Mode: mode}
	rc, err := g.receiptOf(resource, opID)
	switch {
	case err == nil:
		out.Outcome, out.Receipt = OutcomeAccepted, rc
		return out, nil
	case !errors.Is(err, ErrNoReceipt):
		return Reconciliation{}, err
	}
	v, ok, err := g.get(g.shadowKey(resource, opID))
	if err != nil {
		return Reconciliation{}, err
	}
	if ok {
		w, err := decodeWouldRefusal(resource, opID, v)
		if err != nil {
			return Reconciliation{}, fmt.Errorf("resource %q: %w", resource, err)
		}
		out.Outcome = OutcomeAccepted
		out.Receipt = Receipt{Resource: resource, OpID: opID, Token: w.Token, Segment: w.Segment, PayloadDigest: w.PayloadDigest, WouldRefuse: w.Reason}
		return out, nil
	}
	// Below the fence Prune deleted receipts under, no receipt proves
	// nothing: the operation may have been accepted.
	if below := e.st.PrunedBelow; sentUnder.Less(below) {
		return Reconciliation{}, fmt.Errorf("%w: resource %q operation %q sent under %s: no receipt, and those below %s were pruned", ErrPruned, resource, opID, sentUnder, below)
	}
	// Refused needs proof that no copy can ever commit: enforcement, a
	// higher fence accepted, and no shadow commit that went unlogged.
	if out.Mode == ModeEnforce && e.found && sentUnder.Less(e.st.Highest) && e.mode.Unlogged == 0 {
		out.Outcome = OutcomeRefused
	}
	return out, nil
}
