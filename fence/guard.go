package fence

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash/maphash"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

// Payload bounds. The payload is what the Guard digests to recognise a replay;
// the business write itself is staged by the caller.
const (
	// DefaultMaxPayload is GuardOptions.MaxPayload when it is zero.
	DefaultMaxPayload = 1 << 20
	// MaxPayloadLimit is the largest GuardOptions.MaxPayload allowed.
	MaxPayloadLimit = 64 << 20
	// DefaultMaxQuarantine is GuardOptions.MaxQuarantine when it is zero.
	DefaultMaxQuarantine = 10000
	// MaxPrefixLen bounds GuardOptions.Prefix.
	MaxPrefixLen = 64

	lockStripes = 64
)

// GuardOptions configures a Guard.
type GuardOptions struct {
	// Prefix is the key prefix of every record the Guard keeps; the node's
	// Pebble holds other records beside them. Required. Business writes staged
	// in Apply must not use it.
	Prefix []byte
	// Domain, if set, is the one cluster lock domain this Guard serves: every
	// resource is bound to it and node-scope grants are refused (they carry no
	// cluster guarantee). If empty, each resource is bound to the domain and
	// scope of its first accepted grant or of Bind.
	Domain string
	// MaxPayload bounds Mutation.Payload; 0 means DefaultMaxPayload.
	MaxPayload int
	// MaxQuarantine bounds the quarantine log; 0 means DefaultMaxQuarantine.
	// When it is full, conflicting segments are still refused but no longer
	// recorded.
	MaxQuarantine int
	// DefaultMode is the mode of every resource not given one with SetMode;
	// 0 means ModeEnforce. It is stored: once a Guard ran with the default
	// enforce, NewGuard refuses a shadow default (ErrEnforced).
	DefaultMode Mode
	// MaxShadowLog bounds the log of shadow-mode commits enforcement would
	// have refused; 0 means DefaultMaxQuarantine. When it is full they are
	// still counted but no longer logged.
	MaxShadowLog int
	// CacheResources bounds how many resources' records the Guard keeps in
	// memory; 0 means DefaultCacheResources, negative turns the cache off.
	CacheResources int
	// OpIndexBytes is the memory of the filter that proves an operation ID
	// unused without a read; 0 means DefaultOpIndexBytes, negative turns it
	// off (every new operation ID costs a point read). While Prune rebuilds
	// the filter, a second one of this size exists.
	OpIndexBytes int
}

// Mutation is one fenced write as the resource receives it.
type Mutation struct {
	// Signed is the owner's signed lockGrant.v1.
	Signed []byte
	// Resource, Owner and Operation are what the caller claims; the grant must
	// bind exactly these (F3). Owner is the caller's authenticated identity,
	// not something read from the grant.
	Resource  string
	Owner     string
	Operation string
	// OpID names the operation for Receipt after a lost acknowledgement; it is
	// unique per resource (F7).
	OpID string
	// Section is the critical section's place in its delegation
	// (Token.Section of the lock's handle): the Guard orders the mutation
	// by the grant's token with this section, so a paused earlier section
	// of the same delegation is refused as stale. The grant does not sign
	// it: the home signs the delegation, and its holder numbers the
	// sections it admits without a message. 0 is the delegation as a whole.
	Section uint64
	// Segment numbers the segments written under one token from 1.
	Segment uint64
	// Payload identifies the write: a replay must carry the same bytes. The
	// Guard stores only its SHA-256 (and the bytes of a quarantined conflict).
	Payload []byte
}

// Receipt is the Guard's record of one accepted segment, written in the same
// batch as the business change (F6).
type Receipt struct {
	Resource string
	OpID     string
	Token    Token
	Segment  uint64
	// Root is the operation root of the grant (Grant.Root).
	Root [32]byte
	// PayloadDigest is SHA-256 of the mutation's payload.
	PayloadDigest [32]byte
	// Seq is the mutation's position among all the resource accepted, from 1.
	Seq uint64
	// WouldRefuse is set only in what Apply returns for a shadow-mode
	// resource's mutation that enforcement would have refused: the reason.
	// Such a mutation is committed with a WouldRefusal record, not a receipt;
	// Seq and Root are zero and Token is the one in its WouldRefusal.
	WouldRefuse Reason
}

// Guard is the sole acceptance point of protected resources: it accepts a
// fenced mutation only if its grant is authentic, binds the mutation, comes
// from the resource's lock domain and carries the right fence and segment,
// and commits its records in the same synced Pebble batch as the business
// change. See the package documentation for the rules and invariants.
//
// Safe for concurrent use; mutations of one resource are serialised. The
// Guard does not own db and must not be used after db is closed. At most one
// Guard may use a db and prefix at a time: it caches what it stored there.
type Guard struct {
	db          *pebble.DB
	keys        *KeyRing
	prefix      []byte
	domain      string
	maxPayload  int
	maxQuar     int
	maxShadow   int
	defaultMode Mode

	seed    maphash.Seed
	stripes [lockStripes]stripe
	// ops is the operation filter and its replacement while
	// rebuildOpFilter fills one (nil: the filter is off; opfilter.go).
	ops           atomic.Pointer[opFilters]
	opsRebuilding atomic.Bool
	// quarCount and shadowCount are the number of quarantine and shadow log
	// records, bounded by maxQuar and maxShadow.
	quarCount   atomic.Int64
	shadowCount atomic.Int64
	verified    verifiedCache
	stats       guardCounters
}

// NewGuard returns a Guard over db that verifies grants with keys.
func NewGuard(db *pebble.DB, keys *KeyRing, opts GuardOptions) (*Guard, error) {
	switch {
	case db == nil:
		return nil, errors.New("fence: NewGuard: nil db")
	case keys == nil:
		return nil, errors.New("fence: NewGuard: nil key ring")
	case len(opts.Prefix) == 0 || len(opts.Prefix) > MaxPrefixLen:
		return nil, fmt.Errorf("fence: NewGuard: Prefix has %d bytes, want 1 to %d", len(opts.Prefix), MaxPrefixLen)
	case len(opts.Domain) > MaxNameLen:
		return nil, fmt.Errorf("%w: NewGuard: Domain has %d bytes, max %d", ErrTooLarge, len(opts.Domain), MaxNameLen)
	case opts.MaxPayload < 0 || opts.MaxPayload > MaxPayloadLimit:
		return nil, fmt.Errorf("fence: NewGuard: MaxPayload (%d) must be 0 to %d", opts.MaxPayload, MaxPayloadLimit)
	case opts.MaxQuarantine < 0 || opts.MaxShadowLog < 0:
		return nil, fmt.Errorf("fence: NewGuard: MaxQuarantine (%d) and MaxShadowLog (%d) must not be negative", opts.MaxQuarantine, opts.MaxShadowLog)
	case opts.DefaultMode != 0 && !opts.DefaultMode.valid():
		return nil, fmt.Errorf("%w: NewGuard: DefaultMode %s", ErrBadMode, opts.DefaultMode)
	case opts.OpIndexBytes > MaxOpIndexBytes:
		return nil, fmt.Errorf("fence: NewGuard: OpIndexBytes (%d) must be at most %d", opts.OpIndexBytes, MaxOpIndexBytes)
	}
	g := &Guard{
		db:         db,
		keys:       keys,
		prefix:     append([]byte(nil), opts.Prefix...),
		domain:     opts.Domain,
		maxPayload: cmp.Or(opts.MaxPayload, DefaultMaxPayload),
		maxQuar:    cmp.Or(opts.MaxQuarantine, DefaultMaxQuarantine),
		maxShadow:  cmp.Or(opts.MaxShadowLog, DefaultMaxQuarantine),
		seed:       maphash.MakeSeed(),
	}
	g.verified.seed = g.seed
	perStripe := 0
	if c := cmp.Or(opts.CacheResources, DefaultCacheResources); c > 0 {
		perStripe = max(1, c/lockStripes)
	}
	for i := range g.stripes {
		g.stripes[i] = stripe{ch: make(chan struct{}, 1), cache: make(map[string]*entry), max: perStripe}
	}
	if err := g.openDefaultMode(cmp.Or(opts.DefaultMode, ModeEnforce)); err != nil {
		return nil, err
	}
	if b := cmp.Or(opts.OpIndexBytes, DefaultOpIndexBytes); b > 0 {
		f := newOpFilter(max(b, 64))
		if err := g.fillOpFilter(context.Background(), f); err != nil {
			return nil, err
		}
		g.ops.Store(&opFilters{cur: f})
	}
	n, err := g.countQuarantined()
	if err != nil {
		return nil, err
	}
	g.quarCount.Store(n)
	lower, upper := g.kindBounds(kindShadow)
	if n, err = g.count(lower, upper); err != nil {
		return nil, err
	}
	g.shadowCount.Store(n)
	return g, nil
}

func (g *Guard) checkMutation(m *Mutation) error {
	for _, f := range [...]struct {
		name, v string
		max     int
	}{
		{"resource", m.Resource, MaxResourceLen},
		{"owner", m.Owner, MaxNameLen},
		{"operation", m.Operation, MaxNameLen},
		{"operation ID", m.OpID, MaxNameLen},
	} {
		if len(f.v) > f.max {
			return fmt.Errorf("%w: mutation %s has %d bytes, max %d", ErrTooLarge, f.name, len(f.v), f.max)
		}
		if f.v == "" {
			return fmt.Errorf("%w: mutation %s is empty", ErrBadMutation, f.name)
		}
	}
	if m.Segment == 0 {
		return fmt.Errorf("%w: resource %q: segments number from 1", ErrBadMutation, m.Resource)
	}
	if len(m.Payload) > g.maxPayload {
		return fmt.Errorf("%w: resource %q: payload has %d bytes, max %d", ErrTooLarge, m.Resource, len(m.Payload), g.maxPayload)
	}
	return nil
}

// Apply accepts or refuses one fenced mutation. If every check passes, it
// calls stage with a fresh batch so the caller can add its business writes,
// adds the fence state, the receipt and the operation index to the same batch
// and commits it synced: the business change and the fence move together or
// not at all (F6). If a check fails, stage is not called and nothing is
// written (F2), except that a conflicting resend of an accepted segment is
// recorded in the quarantine log.
//
// On a resource in shadow mode a failed check refuses nothing: stage is
// called and its batch committed with a WouldRefusal record and the count of
// its reason, and the fence state is left as it was, so that enforcing the
// resource later judges every mutation as if this one had not come. The
// returned Receipt then has WouldRefuse set. A mutation over its bounds or
// missing a field (ErrTooLarge, ErrBadMutation) is refused in either mode:
// there is nothing to commit it under.
//
// A resend of an accepted segment (same token, segment, operation ID and
// payload) under the current fence returns the original receipt, a nil
// error, and does not call stage.
//
// stage runs with the resource's lock held; it must not call back into the
// Guard for the same resource, and must not write under the Guard's prefix.
// An error from stage aborts the mutation and is returned wrapped. stage may
// be nil for a fence-only write.
func (g *Guard) Apply(ctx context.Context, m Mutation, stage func(b *pebble.Batch) error) (Receipt, error) {
	if err := g.checkMutation(&m); err != nil {
		return Receipt{}, err
	}
	gr, root, authErr := g.authenticate(&m)
	digest := sha256.Sum256(m.Payload)

	s, err := g.lock(ctx, m.Resource)
	if err != nil {
		return Receipt{}, err
	}
	defer s.unlock()
	b := g.db.NewBatch()
	defer b.Close()
	a, ok, rc, err := g.judge(ctx, s, &m, &gr, root, authErr, digest, stage, b)
	if !ok {
		return rc, err
	}
	if err := b.Commit(pebble.Sync); err != nil {
		s.forget(m.Resource)
		return Receipt{}, fmt.Errorf("fence: commit resource %q token %s: %w", m.Resource, gr.Token, err)
	}
	a.committed()
	g.stats.accepted.Add(1)
	return a.rc, nil
}

// staged is a mutation the Guard accepted whose records (and business
// write) are in a batch not yet committed.
type staged struct {
	e  *entry
	st resourceState // the entry's state once the batch is committed
	rc Receipt
}

// committed moves the cache entry to the state its committed batch stored
// (the stripe still held).
func (a staged) committed() { a.e.st, a.e.found, a.e.written = a.st, true, true }

// judge runs Apply's checks on m, authenticated already (gr, root, authErr)
// and digested, under its stripe s (held). If m is accepted it calls stage
// with b, adds the fence records to b and returns them staged: the caller
// commits b synced and then calls committed, or forgets the resource if
// the commit fails. Otherwise it returns ok false with Apply's result: an
// exact resend's original receipt, a refusal, or a shadow-mode commit of
// its own.
func (g *Guard) judge(ctx context.Context, s *stripe, m *Mutation, gr *Grant, root [32]byte, authErr error, digest [32]byte, stage func(b *pebble.Batch) error, b *pebble.Batch) (staged, bool, Receipt, error) {
	e, err := g.entry(s, m.Resource)
	if err != nil {
		return staged{}, false, Receipt{}, err
	}
	opKey := g.opKey(m.Resource, m.OpID)
	verdict := authErr
	var conflict Receipt
	if verdict == nil {
		var rc Receipt
		var replay bool
		rc, replay, verdict = g.check(e, gr, root, m, opKey, digest)
		if replay {
			return staged{}, false, rc, nil
		}
		conflict = rc
	}
	if verdict != nil {
		if ReasonOf(verdict) == ReasonNone { // not a verdict: a read failed
			return staged{}, false, Receipt{}, verdict
		}
		if mode, err := g.mode(e, m.Resource); err != nil {
			return staged{}, false, Receipt{}, err
		} else if mode == ModeShadow {
			rc, err := g.shadowCommit(ctx, s, e, m, gr.Token, digest, verdict, stage)
			return staged{}, false, rc, err
		}
		g.stats.refused[ReasonOf(verdict)].Add(1)
		if errors.Is(verdict, ErrQuarantined) {
			return staged{}, false, Receipt{}, g.quarantine(m, gr.Token, digest, conflict)
		}
		return staged{}, false, Receipt{}, verdict
	}
	if err := ctx.Err(); err != nil {
		return staged{}, false, Receipt{}, fmt.Errorf("fence: resource %q token %s: %w", m.Resource, gr.Token, context.Cause(ctx))
	}

	st := e.st
	if !e.found {
		st.Domain, st.Scope = gr.Domain, gr.Scope
	}
	if gr.Token != st.Highest {
		st.Highest, st.Root = gr.Token, root
	}
	st.LastSegment = m.Segment
	st.Accepted++
	st.MigratedFrom = ""
	rc := Receipt{
		Resource:      m.Resource,
		OpID:          m.OpID,
		Token:         gr.Token,
		Segment:       m.Segment,
		Root:          root,
		PayloadDigest: digest,
		Seq:           st.Accepted,
	}

	if stage != nil {
		if err := stage(b); err != nil {
			return staged{}, false, Receipt{}, fmt.Errorf("fence: stage for resource %q token %s: %w", m.Resource, gr.Token, err)
		}
	}
	// Which state record this write stores, if any (records.go).
	var stateErr error
	writeState := true
	switch {
	case !e.found || !e.written || e.st.MigratedFrom != "":
		st.version = stateExact
	case e.st.version == stateExact:
		st.version = stateFloor
	default:
		writeState = false // a floor already: the receipt carries it on
	}
	if writeState {
		stateErr = b.Set(g.stateKey(m.Resource), st.encode(), nil)
	}
	if err := errors.Join(
		stateErr,
		b.Set(g.receiptKey(m.Resource, gr.Token, m.Segment), rc.encode(), nil),
		b.Set(opKey, encodeOpRef(gr.Token, m.Segment), nil),
	); err != nil {
		return staged{}, false, Receipt{}, fmt.Errorf("fence: resource %q token %s: %w", m.Resource, gr.Token, err)
	}
	// Into the filter before the commit: if the commit's outcome is unknown,
	// a false positive costs a read; a false negative would accept the
	// operation twice (F7).
	g.addOp(opKey)
	return staged{e: e, st: st, rc: rc}, true, Receipt{}, nil
}

// authenticate verifies m's grant and that it binds m (F3), and refuses a
// node-scope grant where a cluster guarantee is required (F4). It reads no
// resource state.
func (g *Guard) authenticate(m *Mutation) (Grant, [32]byte, error) {
	gr, root, err := g.verified.verify(g.keys, m.Signed)
	if err != nil {
		return Grant{}, root, fmt.Errorf("%w: resource %q", err, m.Resource)
	}
	// The fence is the signed delegation's token with the holder's section
	// (see Mutation.Section); every section shares the grant's root.
	gr.Token.Section = m.Section
	// F3: the proof must be for this resource, this caller and this kind of
	// operation; a valid grant for another resource is a replay.
	switch {
	case gr.Resource != m.Resource:
		err = fmt.Errorf("%w: grant for resource %q presented for resource %q token %s", ErrBadGrant, gr.Resource, m.Resource, gr.Token)
	case gr.Owner != m.Owner:
		err = fmt.Errorf("%w: grant for owner %q presented by %q: resource %q token %s", ErrBadGrant, gr.Owner, m.Owner, m.Resource, gr.Token)
	case gr.Operation != m.Operation:
		err = fmt.Errorf("%w: grant for operation %q presented for %q: resource %q token %s", ErrBadGrant, gr.Operation, m.Operation, m.Resource, gr.Token)
	case gr.Scope == ScopeNode && g.domain != "":
		err = fmt.Errorf("%w: node-scope grant has no cluster guarantee, guard serves cluster domain %q: resource %q token %s", ErrForeignDomain, g.domain, m.Resource, gr.Token)
	}
	return gr, root, err
}

// check applies the acceptance rules to an authenticated grant. It returns
// replay=true with the original receipt for an exact resend, an error for a
// refusal, and neither to accept. It writes nothing. For a conflicting resend
// (ErrQuarantined) it returns the receipt that stands beside the error.
func (g *Guard) check(e *entry, gr *Grant, root [32]byte, m *Mutation, opKey []byte, digest [32]byte) (Receipt, bool, error) {
	st := &e.st
	res, tok := m.Resource, gr.Token
	// F4: one resource, one lock domain. Tokens of two domains have no order
	// between them, so a foreign grant is refused before any comparison.
	if !e.found {
		if g.domain != "" && gr.Domain != g.domain {
			return Receipt{}, false, fmt.Errorf("%w: grant from domain %q, guard serves %q: resource %q token %s", ErrForeignDomain, gr.Domain, g.domain, res, tok)
		}
	} else {
		switch {
		case gr.Domain != st.Domain && st.MigratedFrom == gr.Domain:
			return Receipt{}, false, fmt.Errorf("%w: resource %q migrated from domain %q to %q: token %s", ErrForeignDomain, res, st.MigratedFrom, st.Domain, tok)
		case gr.Domain != st.Domain:
			return Receipt{}, false, fmt.Errorf("%w: grant from domain %q, resource bound to %q: resource %q token %s", ErrForeignDomain, gr.Domain, st.Domain, res, tok)
		case gr.Scope != st.Scope:
			return Receipt{}, false, fmt.Errorf("%w: %s-scope grant for %s-scope resource %q token %s", ErrForeignDomain, gr.Scope, st.Scope, res, tok)
		}
	}

	c := tok.Compare(st.Highest)
	if c <= 0 && st.MigratedFrom != "" {
		return Receipt{}, false, fmt.Errorf("%w: resource %q token %s: domain %q must issue tokens above %s, the highest fence of domain %q; writes pause until it does",
			ErrMigrationPending, res, tok, st.Domain, st.Highest, st.MigratedFrom)
	}
	switch {
	case c < 0:
		// A token below the highest is refused either way (F1); the question
		// is only which error. Every receipt under one token shares one root
		// (F5), so if the resource accepted this token under another grant,
		// the issuer minted it twice: it regressed.
		other, err := g.rootUnder(res, tok)
		if err != nil {
			return Receipt{}, false, err
		}
		if other != nil && *other != root {
			return Receipt{}, false, fmt.Errorf("%w: resource %q token %s was accepted under another grant; highest %s", ErrFenceRegression, res, tok, st.Highest)
		}
		return Receipt{}, false, fmt.Errorf("%w: resource %q token %s below highest %s", ErrStaleOwner, res, tok, st.Highest)

	case c == 0:
		if root != st.Root {
			return Receipt{}, false, fmt.Errorf("%w: resource %q token %s: the highest fence was accepted under another grant", ErrFenceRegression, res, tok)
		}
		if m.Segment <= st.LastSegment {
			return g.replay(m, tok, digest)
		}
		if m.Segment != st.LastSegment+1 {
			return Receipt{}, false, fmt.Errorf("%w: resource %q token %s segment %d, want %d", ErrSegmentOrder, res, tok, m.Segment, st.LastSegment+1)
		}

	default:
		if m.Segment != 1 {
			return Receipt{}, false, fmt.Errorf("%w: resource %q token %s is a new fence and must start at segment 1, got %d", ErrSegmentOrder, res, tok, m.Segment)
		}
	}

	// F7: an operation has at most one receipt. Resending it under a new
	// fence would apply it twice; the caller must ask Receipt instead.
	if prev, seg, ok, err := g.opRefAt(opKey, res, m.OpID); err != nil {
		return Receipt{}, false, err
	} else if ok {
		return Receipt{}, false, fmt.Errorf("%w: resource %q token %s: operation %q has a receipt under token %s segment %d", ErrDuplicateOp, res, tok, m.OpID, prev, seg)
	}
	return Receipt{}, false, nil
}

// replay answers a resend of an accepted segment under the current fence.
func (g *Guard) replay(m *Mutation, tok Token, digest [32]byte) (Receipt, bool, error) {
	rc, ok, err := g.receiptAt(m.Resource, tok, m.Segment)
	if err != nil {
		return Receipt{}, false, err
	}
	if !ok {
		return Receipt{}, false, fmt.Errorf("%w: resource %q token %s segment %d accepted but has no receipt", ErrCorruptRecord, m.Resource, tok, m.Segment)
	}
	if rc.OpID == m.OpID && rc.PayloadDigest == digest {
		return rc, true, nil
	}
	return rc, false, fmt.Errorf("%w: resource %q token %s segment %d: accepted as operation %q with another payload", ErrQuarantined, m.Resource, tok, m.Segment, rc.OpID)
}

func (g *Guard) get(key []byte) ([]byte, bool, error) {
	v, closer, err := g.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("fence: read: %w", err)
	}
	out := append([]byte(nil), v...)
	closer.Close()
	return out, true, nil
}

// loadState reads res's state: its state record, and when that is a floor,
// the fence position its last receipt carries it on to (records.go).
func (g *Guard) loadState(res string) (resourceState, bool, error) {
	v, ok, err := g.get(g.stateKey(res))
	if err != nil || !ok {
		return resourceState{}, false, err
	}
	st, err := decodeState(v)
	if err != nil {
		return resourceState{}, false, fmt.Errorf("resource %q: %w", res, err)
	}
	if err := g.carryOn(res, &st); err != nil {
		return resourceState{}, false, err
	}
	return st, true, nil
}

// carryOn advances a floor state to res's last receipt.
func (g *Guard) carryOn(res string, st *resourceState) error {
	if st.version != stateFloor {
		return nil
	}
	rc, ok, err := g.lastReceipt(res)
	if ok {
		st.advance(&rc)
	}
	return err
}

// lastReceipt is res's receipt with the highest token and segment, which is
// also its latest.
func (g *Guard) lastReceipt(res string) (Receipt, bool, error) {
	lower := g.resourceKey(kindReceipt, res, 0)
	it, err := g.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: keyUpperBound(lower)})
	if err != nil {
		return Receipt{}, false, fmt.Errorf("fence: read: %w", err)
	}
	defer it.Close()
	if !it.Last() {
		return Receipt{}, false, it.Error()
	}
	v, err := it.ValueAndErr()
	if err != nil {
		return Receipt{}, false, fmt.Errorf("fence: read: %w", err)
	}
	rc, err := decodeReceipt(res, v)
	if err != nil {
		return Receipt{}, false, fmt.Errorf("resource %q last receipt: %w", res, err)
	}
	return rc, true, nil
}

func (g *Guard) receiptAt(res string, t Token, seg uint64) (Receipt, bool, error) {
	v, ok, err := g.get(g.receiptKey(res, t, seg))
	if err != nil || !ok {
		return Receipt{}, false, err
	}
	rc, err := decodeReceipt(res, v)
	if err != nil {
		return Receipt{}, false, fmt.Errorf("resource %q token %s: %w", res, t, err)
	}
	return rc, true, nil
}

func (g *Guard) opRef(res, opID string) (Token, uint64, bool, error) {
	v, ok, err := g.get(g.opKey(res, opID))
	if err != nil || !ok {
		return Token{}, 0, false, err
	}
	t, seg, err := decodeOpRef(v)
	if err != nil {
		return Token{}, 0, false, fmt.Errorf("resource %q operation %q: %w", res, opID, err)
	}
	return t, seg, true, nil
}

// rootUnder returns the operation root of the first receipt the resource
// holds under token t, or nil if it accepted nothing under t.
func (g *Guard) rootUnder(res string, t Token) (*[32]byte, error) {
	lower := appendToken(g.resourceKey(kindReceipt, res, TokenSize), t)
	upper := keyUpperBound(lower)
	it, err := g.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, fmt.Errorf("fence: read: %w", err)
	}
	defer it.Close()
	if !it.First() {
		return nil, it.Error()
	}
	v, err := it.ValueAndErr()
	if err != nil {
		return nil, fmt.Errorf("fence: read: %w", err)
	}
	rc, err := decodeReceipt(res, v)
	if err != nil {
		return nil, fmt.Errorf("resource %q token %s: %w", res, t, err)
	}
	return &rc.Root, nil
}

// keyUpperBound returns the smallest key above every key with prefix p.
func keyUpperBound(p []byte) []byte {
	u := append([]byte(nil), p...)
	for i := len(u) - 1; i >= 0; i-- {
		u[i]++
		if u[i] != 0 {
			return u[:i+1]
		}
	}
	return nil // p is all 0xff: no upper bound
}

// Receipt answers "did my write happen?" after a lost acknowledgement: the
// receipt of operation opID on resource, or ErrNoReceipt. It waits for any
// Apply of the resource in progress, so an answer is never older than an
// acknowledgement already sent. ErrNoReceipt is final only once the asking
// owner's fence is superseded (a newer fence accepted): until then its
// mutation may still be in flight. On a resource whose receipts were pruned
// (Prune) an operation without a receipt is ErrPruned instead: Receipt does
// not know which fence it was sent under (Reconcile does).
func (g *Guard) Receipt(ctx context.Context, resource, opID string) (Receipt, error) {
	if len(resource) > MaxResourceLen || len(opID) > MaxNameLen {
		return Receipt{}, fmt.Errorf("%w: resource or operation ID over %d/%d bytes", ErrTooLarge, MaxResourceLen, MaxNameLen)
	}
	s, err := g.lock(ctx, resource)
	if err != nil {
		return Receipt{}, err
	}
	defer s.unlock()
	rc, err := g.receiptOf(resource, opID)
	if !errors.Is(err, ErrNoReceipt) {
		return rc, err
	}
	e, entryErr := g.entry(s, resource)
	if entryErr != nil {
		return Receipt{}, entryErr
	}
	if below := e.st.PrunedBelow; !below.IsZero() {
		return Receipt{}, fmt.Errorf("%w: resource %q operation %q: no receipt, and those below %s were pruned", ErrPruned, resource, opID, below)
	}
	return Receipt{}, err
}

// receiptOf is Receipt with the resource's stripe held.
func (g *Guard) receiptOf(resource, opID string) (Receipt, error) {
	t, seg, ok, err := g.opRef(resource, opID)
	if err != nil {
		return Receipt{}, err
	}
	if !ok {
		return Receipt{}, fmt.Errorf("%w: resource %q operation %q", ErrNoReceipt, resource, opID)
	}
	rc, ok, err := g.receiptAt(resource, t, seg)
	if err != nil {
		return Receipt{}, err
	}
	if !ok {
		return Receipt{}, fmt.Errorf("%w: resource %q operation %q indexed at token %s segment %d without a receipt", ErrCorruptRecord, resource, opID, t, seg)
	}
	return rc, nil
}
