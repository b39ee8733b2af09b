package fence

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// Mode is how a resource's Guard treats a mutation its rules refuse.
//
// A resource is rolled out in shadow mode first: every rule is checked, and a
// mutation that enforcement would refuse is committed anyway, counted and
// logged with its reason, so an operator can see what enforcing would break
// before it breaks anything. Then the resource is enforced. The step back is
// refused (ErrEnforced): once a resource refuses stale writers, nothing turns
// its validation off again.
type Mode uint8

const (
	// ModeShadow checks every rule and refuses nothing.
	ModeShadow Mode = 1
	// ModeEnforce refuses every mutation that fails a rule. It is the default
	// (GuardOptions.DefaultMode zero).
	ModeEnforce Mode = 2
)

func (m Mode) String() string {
	switch m {
	case ModeShadow:
		return "shadow"
	case ModeEnforce:
		return "enforce"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

func (m Mode) valid() bool { return m == ModeShadow || m == ModeEnforce }

// ParseMode parses "shadow" or "enforce". There is no name for a mode that
// turns validation off: "off", "disabled" and the like are ErrBadMode.
func ParseMode(s string) (Mode, error) {
	switch strings.ToLower(s) {
	case "shadow":
		return ModeShadow, nil
	case "enforce":
		return ModeEnforce, nil
	}
	return 0, fmt.Errorf("%w: %q: want shadow or enforce; no mode turns validation off", ErrBadMode, s)
}

// Reason classifies a refusal: the rule a mutation failed. Shadow mode counts
// what it would have refused by reason; ReasonOf maps a Guard error to one.
type Reason uint8

const (
	// ReasonNone is no refusal: the error, if any, is not a verdict on the
	// mutation (a malformed call, a read error, a cancelled context).
	ReasonNone Reason = iota
	ReasonBadGrant
	ReasonRevoked
	ReasonForeignDomain
	ReasonMigrationPending
	ReasonStaleOwner
	ReasonFenceRegression
	ReasonSegmentOrder
	ReasonQuarantined
	ReasonDuplicateOp

	reasonCount
)

// reasonErrs is in rule order; ErrBadGrant wraps ErrTooLarge for an oversized
// grant, so it comes first.
var reasonErrs = [reasonCount]error{
	ReasonBadGrant:         ErrBadGrant,
	ReasonRevoked:          ErrRevoked,
	ReasonForeignDomain:    ErrForeignDomain,
	ReasonMigrationPending: ErrMigrationPending,
	ReasonStaleOwner:       ErrStaleOwner,
	ReasonFenceRegression:  ErrFenceRegression,
	ReasonSegmentOrder:     ErrSegmentOrder,
	ReasonQuarantined:      ErrQuarantined,
	ReasonDuplicateOp:      ErrDuplicateOp,
}

var reasonNames = [reasonCount]string{
	ReasonNone:             "none",
	ReasonBadGrant:         "bad_grant",
	ReasonRevoked:          "revoked",
	ReasonForeignDomain:    "foreign_domain",
	ReasonMigrationPending: "migration_pending",
	ReasonStaleOwner:       "stale_owner",
	ReasonFenceRegression:  "fence_regression",
	ReasonSegmentOrder:     "segment_order",
	ReasonQuarantined:      "quarantined",
	ReasonDuplicateOp:      "duplicate_op",
}

// Reasons lists every reason but ReasonNone, in rule order.
func Reasons() []Reason {
	out := make([]Reason, 0, reasonCount-1)
	for r := ReasonNone + 1; r < reasonCount; r++ {
		out = append(out, r)
	}
	return out
}

// String is the reason's metric label, e.g. "stale_owner".
func (r Reason) String() string {
	if r < reasonCount {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// Err is the sentinel error of r (nil for ReasonNone).
func (r Reason) Err() error {
	if r < reasonCount {
		return reasonErrs[r]
	}
	return nil
}

// ReasonOf returns the rule err reports a mutation failed, or ReasonNone.
func ReasonOf(err error) Reason {
	if err == nil {
		return ReasonNone
	}
	for r := ReasonNone + 1; r < reasonCount; r++ {
		if errors.Is(err, reasonErrs[r]) {
			return r
		}
	}
	return ReasonNone
}

// ReasonCounts counts mutations by Reason; index it with a Reason.
type ReasonCounts [reasonCount]uint64

// Total is the sum over every reason.
func (c *ReasonCounts) Total() uint64 {
	var n uint64
	for _, v := range c {
		n += v
	}
	return n
}

// modeRecord is what the Guard keeps about a resource's mode: the mode set
// for it (or none: it follows the Guard's default), when it was enforced,
// and what shadow mode let through. None of it is fence state: no check but
// the choice between refusing and logging reads it.
type modeRecord struct {
	// Mode is the mode set with SetMode, or 0 to follow the default.
	Mode Mode
	// EnforcedAt is the resource's accepted count when SetMode enforced it,
	// and EnforcedHighest its highest fence then: the durable record of the
	// step from shadow to enforce.
	EnforcedAt      uint64
	EnforcedHighest Token
	// WouldRefuse counts shadow-mode commits by the reason enforcement would
	// have refused them; Unlogged counts those the bounded log dropped.
	WouldRefuse ReasonCounts
	Unlogged    uint64
}

func (r *modeRecord) encode() []byte {
	b := make([]byte, 0, 2+8+TokenSize+1+8*int(reasonCount)+8)
	b = append(b, recordVersion, byte(r.Mode))
	b = binary.BigEndian.AppendUint64(b, r.EnforcedAt)
	b = appendToken(b, r.EnforcedHighest)
	b = append(b, byte(reasonCount))
	for _, v := range r.WouldRefuse {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	return binary.BigEndian.AppendUint64(b, r.Unlogged)
}

func decodeModeRecord(b []byte) (modeRecord, error) {
	d := decoder{b: b, what: "mode record", base: ErrCorruptRecord}
	if v := d.u8("version"); d.err == nil && v != recordVersion {
		d.fail("unknown version %d", v)
	}
	var r modeRecord
	r.Mode = Mode(d.u8("mode"))
	if d.err == nil && r.Mode != 0 && !r.Mode.valid() {
		d.fail("mode %d", r.Mode)
	}
	r.EnforcedAt = d.u64("enforced at")
	r.EnforcedHighest = d.token("enforced highest")
	if n := d.u8("reasons"); d.err == nil && n != byte(reasonCount) {
		d.fail("%d reasons, want %d", n, reasonCount)
	}
	for i := range r.WouldRefuse {
		r.WouldRefuse[i] = d.u64("would-refuse count")
	}
	r.Unlogged = d.u64("unlogged")
	return r, d.finish()
}

// The Guard-wide default mode is stored too, so that a restart with a laxer
// GuardOptions.DefaultMode cannot relax resources enforced by default.
func encodeDefaultMode(m Mode) []byte { return []byte{recordVersion, byte(m)} }

func decodeDefaultMode(b []byte) (Mode, error) {
	d := decoder{b: b, what: "default mode record", base: ErrCorruptRecord}
	if v := d.u8("version"); d.err == nil && v != recordVersion {
		d.fail("unknown version %d", v)
	}
	m := Mode(d.u8("mode"))
	if d.err == nil && !m.valid() {
		d.fail("mode %d", m)
	}
	return m, d.finish()
}

// WouldRefusal is a mutation a shadow-mode resource committed although
// enforcement would have refused it. The log keeps the last one per operation
// ID, up to GuardOptions.MaxShadowLog records.
type WouldRefusal struct {
	Resource string
	OpID     string
	Owner    string
	// Token is the grant's token, zero for a grant that failed
	// authentication (its claims are not read).
	Token         Token
	Segment       uint64
	PayloadDigest [32]byte
	Reason        Reason
	// Seq is the resource's accepted count when it was committed: it came
	// after the Seq-th receipt.
	Seq uint64
}

func (w *WouldRefusal) encode() []byte {
	b := make([]byte, 0, 1+1+2+len(w.Owner)+TokenSize+8+32+8)
	b = append(b, recordVersion, byte(w.Reason))
	b = appendU16String(b, w.Owner)
	b = appendToken(b, w.Token)
	b = binary.BigEndian.AppendUint64(b, w.Segment)
	b = append(b, w.PayloadDigest[:]...)
	return binary.BigEndian.AppendUint64(b, w.Seq)
}

func decodeWouldRefusal(res, opID string, b []byte) (WouldRefusal, error) {
	d := decoder{b: b, what: "would-refuse record", base: ErrCorruptRecord}
	if v := d.u8("version"); d.err == nil && v != recordVersion {
		d.fail("unknown version %d", v)
	}
	w := WouldRefusal{Resource: res, OpID: opID}
	w.Reason = Reason(d.u8("reason"))
	if d.err == nil && (w.Reason == ReasonNone || w.Reason >= reasonCount) {
		d.fail("reason %d", w.Reason)
	}
	w.Owner = d.string16("owner", MaxNameLen)
	w.Token = d.token("token")
	w.Segment = d.u64("segment")
	w.PayloadDigest = d.digest("payload digest")
	w.Seq = d.u64("seq")
	return w, d.finish()
}

// openDefaultMode reconciles the stored default mode with want: a store whose
// default was enforced (or that holds fence state from before modes were
// stored, which was enforced) refuses a shadow default.
func (g *Guard) openDefaultMode(want Mode) error {
	key := g.defaultModeKey()
	v, ok, err := g.get(key)
	if err != nil {
		return err
	}
	stored := Mode(0)
	if ok {
		if stored, err = decodeDefaultMode(v); err != nil {
			return err
		}
	} else if any, err := g.anyState(); err != nil {
		return err
	} else if any {
		stored = ModeEnforce
	}
	if stored == ModeEnforce && want != ModeEnforce {
		return fmt.Errorf("%w: NewGuard: the default mode is enforce; it cannot return to %s", ErrEnforced, want)
	}
	g.defaultMode = want
	if ok && stored == want {
		return nil
	}
	if err := g.db.Set(key, encodeDefaultMode(want), pebble.Sync); err != nil {
		return fmt.Errorf("fence: NewGuard: store default mode: %w", err)
	}
	return nil
}

func (g *Guard) anyState() (bool, error) {
	lower, upper := g.kindBounds(kindState)
	it, err := g.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return false, fmt.Errorf("fence: read: %w", err)
	}
	found := it.First()
	return found, errors.Join(it.Error(), it.Close())
}

// mode is the mode that applies to res, whose entry is e (its stripe held).
func (g *Guard) mode(e *entry, res string) (Mode, error) {
	if !e.modeRead {
		r, _, err := g.loadMode(res)
		if err != nil {
			return 0, err
		}
		e.mode, e.modeRead = r, true
	}
	if e.mode.Mode != 0 {
		return e.mode.Mode, nil
	}
	return g.defaultMode, nil
}

// SetMode sets the mode of resource. Shadow to enforce is a synced write
// that records when it happened (ResourceInfo.EnforcedAt); setting the mode a
// resource already has records it for the resource, so that a later change
// of the Guard's default does not move it. A resource in enforce mode,
// whether set or by default, cannot go back: that is ErrEnforced.
func (g *Guard) SetMode(ctx context.Context, resource string, mode Mode) error {
	switch {
	case len(resource) > MaxResourceLen:
		return fmt.Errorf("%w: resource has %d bytes, max %d", ErrTooLarge, len(resource), MaxResourceLen)
	case resource == "":
		return fmt.Errorf("%w: empty resource", ErrBadMutation)
	case !mode.valid():
		return fmt.Errorf("%w: %s for resource %q", ErrBadMode, mode, resource)
	}
	s, err := g.lock(ctx, resource)
	if err != nil {
		return err
	}
	defer s.unlock()
	e, err := g.entry(s, resource)
	if err != nil {
		return err
	}
	cur, err := g.mode(e, resource)
	if err != nil {
		return err
	}
	switch {
	case cur == ModeEnforce && mode != ModeEnforce:
		return fmt.Errorf("%w: resource %q (highest %s) cannot go to %s", ErrEnforced, resource, e.st.Highest, mode)
	case e.mode.Mode == mode:
		return nil
	}
	rec := e.mode
	rec.Mode = mode
	if cur == ModeShadow && mode == ModeEnforce {
		rec.EnforcedAt, rec.EnforcedHighest = e.st.Accepted, e.st.Highest
	}
	if err := g.db.Set(g.modeKey(resource), rec.encode(), pebble.Sync); err != nil {
		s.forget(resource)
		return fmt.Errorf("fence: set mode of resource %q: %w", resource, err)
	}
	e.mode = rec
	return nil
}

// WouldRefuse lists the shadow log of resource, or of every resource if
// resource is empty: the mutations committed in shadow mode that enforcement
// would have refused.
func (g *Guard) WouldRefuse(ctx context.Context, resource string) ([]WouldRefusal, error) {
	if len(resource) > MaxResourceLen {
		return nil, fmt.Errorf("%w: resource has %d bytes, max %d", ErrTooLarge, len(resource), MaxResourceLen)
	}
	lower, upper := g.kindBounds(kindShadow)
	if resource != "" {
		lower = g.resourceKey(kindShadow, resource, 0)
		upper = keyUpperBound(lower)
	}
	var out []WouldRefusal
	err := g.scan(ctx, lower, upper, func(key, value []byte) error {
		res, opID, err := g.resourceOfKey(key)
		if err != nil {
			return err
		}
		w, err := decodeWouldRefusal(res, string(opID), value)
		if err != nil {
			return fmt.Errorf("resource %q: %w", res, err)
		}
		out = append(out, w)
		return nil
	})
	return out, err
}

// shadowCommit commits a mutation that enforcement would refuse for reason,
// on a shadow-mode resource: the business change, the count and a log record,
// and nothing of the fence state, so that a later enforce judges every
// mutation as if this one had never come (F1, F5 and F7 see none of it).
// e.mode has been read (Guard.mode).
func (g *Guard) shadowCommit(ctx context.Context, s *stripe, e *entry, m *Mutation, claimed Token, digest [32]byte, verdict error, stage func(*pebble.Batch) error) (Receipt, error) {
	reason := ReasonOf(verdict)
	if err := ctx.Err(); err != nil {
		return Receipt{}, fmt.Errorf("fence: resource %q token %s: %w", m.Resource, claimed, context.Cause(ctx))
	}
	b := g.db.NewBatch()
	defer b.Close()
	if stage != nil {
		if err := stage(b); err != nil {
			return Receipt{}, fmt.Errorf("fence: stage for resource %q token %s: %w", m.Resource, claimed, err)
		}
	}
	rec := e.mode
	rec.WouldRefuse[reason]++
	key := g.shadowKey(m.Resource, m.OpID)
	_, exists, err := g.get(key)
	if err != nil {
		return Receipt{}, err
	}
	reserved := false
	if !exists {
		if g.shadowCount.Add(1) > int64(g.maxShadow) {
			g.shadowCount.Add(-1)
			rec.Unlogged++
		} else {
			reserved = true
		}
	}
	w := WouldRefusal{
		Resource: m.Resource, OpID: m.OpID, Owner: m.Owner, Token: claimed, Segment: m.Segment,
		PayloadDigest: digest, Reason: reason, Seq: e.st.Accepted,
	}
	var errs []error
	if exists || reserved {
		errs = append(errs, b.Set(key, w.encode(), nil))
	}
	errs = append(errs, b.Set(g.modeKey(m.Resource), rec.encode(), nil))
	err = errors.Join(errs...)
	if err == nil {
		err = b.Commit(pebble.Sync)
	}
	if err != nil {
		if reserved {
			g.shadowCount.Add(-1)
		}
		s.forget(m.Resource)
		return Receipt{}, fmt.Errorf("fence: commit shadow write of resource %q token %s: %w", m.Resource, claimed, err)
	}
	e.mode = rec
	g.stats.wouldRefuse[reason].Add(1)
	return Receipt{
		Resource: m.Resource, OpID: m.OpID, Token: claimed, Segment: m.Segment,
		PayloadDigest: digest, WouldRefuse: reason,
	}, nil
}
