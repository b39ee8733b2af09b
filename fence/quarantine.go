package fence

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Quarantined is a refused resend of an accepted segment that carried a
// different payload or operation ID. Two writers (or one buggy one) produced
// two different segments under one fence; the Guard keeps the first and
// records the second for an operator to reconcile.
type Quarantined struct {
	Resource string
	Owner    string
	OpID     string
	Token    Token
	Segment  uint64
	// PayloadDigest and Payload are the refused mutation's.
	PayloadDigest [32]byte
	Payload       []byte
	// Accepted is the receipt of the segment that stands.
	Accepted Receipt
}

// quarantine records a conflicting resend and returns the ErrQuarantined the
// caller gets. The record is the one write a refusal makes; it lives outside
// the fence state and no check reads it, so F2 holds for the fence. Records are
// keyed by token, segment and payload digest, so retrying one conflict does
// not grow the log.
func (g *Guard) quarantine(m *Mutation, tok Token, digest [32]byte, accepted Receipt) error {
	refused := fmt.Errorf("%w: resource %q token %s segment %d: accepted as operation %q with another payload", ErrQuarantined, m.Resource, tok, m.Segment, accepted.OpID)
	key := g.quarantineKey(m.Resource, tok, m.Segment, digest)
	if _, exists, err := g.get(key); err != nil {
		return fmt.Errorf("%w (not recorded: %v)", refused, err)
	} else if exists {
		return refused
	}
	// Reserve a slot first so concurrent conflicts on other resources cannot
	// overshoot the bound together.
	if g.quarCount.Add(1) > int64(g.maxQuar) {
		g.quarCount.Add(-1)
		return fmt.Errorf("%w (not recorded: quarantine log holds its maximum of %d)", refused, g.maxQuar)
	}
	q := Quarantined{
		Resource: m.Resource, Owner: m.Owner, OpID: m.OpID, Token: tok, Segment: m.Segment,
		PayloadDigest: digest, Payload: m.Payload, Accepted: accepted,
	}
	if err := g.db.Set(key, q.encode(), pebble.Sync); err != nil {
		g.quarCount.Add(-1)
		return fmt.Errorf("%w (not recorded: %v)", refused, err)
	}
	return refused
}

// Quarantined lists the quarantine log for resource, or for every resource
// if resource is empty.
func (g *Guard) Quarantined(ctx context.Context, resource string) ([]Quarantined, error) {
	if len(resource) > MaxResourceLen {
		return nil, fmt.Errorf("%w: resource has %d bytes, max %d", ErrTooLarge, len(resource), MaxResourceLen)
	}
	var out []Quarantined
	err := g.scanQuarantine(ctx, resource, func(key, value []byte) error {
		res, _, err := g.resourceOfKey(key)
		if err != nil {
			return err
		}
		q, err := decodeQuarantined(res, value)
		if err != nil {
			return fmt.Errorf("resource %q: %w", res, err)
		}
		out = append(out, q)
		return nil
	})
	return out, err
}

// ClearQuarantine deletes the quarantine log of resource once an operator has
// reconciled it. It touches no fence state.
func (g *Guard) ClearQuarantine(ctx context.Context, resource string) error {
	if resource == "" || len(resource) > MaxResourceLen {
		return fmt.Errorf("%w: resource must have 1 to %d bytes", ErrBadMutation, MaxResourceLen)
	}
	s, err := g.lock(ctx, resource)
	if err != nil {
		return err
	}
	defer s.unlock()
	b := g.db.NewBatch()
	defer b.Close()
	var n int64
	if err := g.scanQuarantine(ctx, resource, func(key, _ []byte) error {
		n++
		return b.Delete(key, nil)
	}); err != nil {
		return err
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("fence: clear quarantine of %q: %w", resource, err)
	}
	g.quarCount.Add(-n)
	return nil
}

func (g *Guard) scanQuarantine(ctx context.Context, resource string, fn func(key, value []byte) error) error {
	lower, upper := g.kindBounds(kindQuarantine)
	if resource != "" {
		lower = g.resourceKey(kindQuarantine, resource, 0)
		upper = keyUpperBound(lower)
	}
	return g.scan(ctx, lower, upper, fn)
}

func (g *Guard) countQuarantined() (int64, error) {
	lower, upper := g.kindBounds(kindQuarantine)
	return g.count(lower, upper)
}
