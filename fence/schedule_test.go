package fence

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

var (
	flagSchedules    = flag.Int("schedules", 5000, "number of seeded schedules TestSchedules runs")
	flagScheduleSeed = flag.Uint64("schedule.seed", 0, "run only the schedule with this seed (replay a failure)")
	flagScheduleBase = flag.Uint64("schedule.base", 1, "seed of the first schedule")
)

// TestSchedules drives a Guard through seeded adversarial schedules: owners
// acquire, pause, write segments, resend, and lose acknowledgements; the
// store prunes receipts (rebuilding the operation filter) and reopens its
// Guard; the network delays, duplicates and reorders; the lock service restarts,
// restores old snapshots, revokes issuer epochs and rotates keys; a forger
// tampers, replays across resources, impersonates owners and brings grants
// from a foreign domain. Each outcome is checked three ways:
//
//   - against ground truth kept by the schedule itself (seed 000's release
//     gate): no accepted stale write, forged grant, skipped segment or
//     regressed token;
//   - F2: a full dump of the schedule's stored records is identical before and
//     after every refused Apply (the quarantine log aside, which may grow by
//     one record only on ErrQuarantined);
//   - against a reference model of the acceptance rules, which must predict
//     the exact outcome (error class, or receipt).
func TestSchedules(t *testing.T) {
	seeds := make(chan uint64)
	go func() {
		defer close(seeds)
		if *flagScheduleSeed != 0 {
			seeds <- *flagScheduleSeed
			return
		}
		for i := range uint64(*flagSchedules) {
			seeds <- *flagScheduleBase + i
		}
	}()
	var tot scheduleStats
	var failures atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var db *pebble.DB
			ran := 0
			for seed := range seeds {
				if db == nil || ran%200 == 0 {
					if db != nil {
						db.Close()
					}
					db = openPebble(t, vfs.NewMem(), "db")
				}
				ran++
				s := runSchedule(db, seed)
				tot.add(&s.stats)
				if s.failure != "" && failures.Add(1) <= 5 {
					t.Errorf("schedule seed %d: %s\nlast events:\n  %s\nreplay: go test ./fence -run 'TestSchedules$' -schedule.seed=%d -v",
						seed, s.failure, strings.Join(s.lastEvents(), "\n  "), seed)
				}
			}
			if db != nil {
				db.Close()
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	n := tot.schedules.Load()
	t.Logf("%d schedules in %v (%.0f schedules/s), %d applies: %d accepted, %d replays, %d refused (%d attacks refused, %d stale refused, %d regressions, %d quarantined); lost acks checked %d",
		n, el.Round(time.Millisecond), float64(n)/el.Seconds(), tot.applies.Load(), tot.accepted.Load(), tot.replays.Load(),
		tot.refused.Load(), tot.attacksRefused.Load(), tot.staleRefused.Load(), tot.regressions.Load(), tot.quarantined.Load(), tot.lostAcks.Load())
	t.Logf("violations: accepted stale writes %d, accepted forged grants %d, accepted skipped segments %d, accepted regressed tokens %d, failed checks that changed state %d, model mismatches %d",
		tot.staleAccepted.Load(), tot.forgedAccepted.Load(), tot.skippedAccepted.Load(), tot.regressedAccepted.Load(), tot.failedChanged.Load(), tot.mismatches.Load())
	t.Logf("store: %d prunes deleting %d receipts, %d filter rebuilds, %d Guards reopened; reused operation IDs: %d refused as duplicates, %d accepted",
		tot.prunes.Load(), tot.prunedReceipts.Load(), tot.filterRebuilds.Load(), tot.guardReopens.Load(), tot.duplicateOps.Load(), tot.reusedAccepted.Load())
	if n >= 1000 {
		// The store's own steps must have run, or the model's pruned
		// answers were never checked.
		for name, v := range map[string]int64{"pruned receipts": tot.prunedReceipts.Load(), "filter rebuilds": tot.filterRebuilds.Load(), "Guard reopens": tot.guardReopens.Load(),
			"duplicate operation refusals": tot.duplicateOps.Load(), "reused operation IDs accepted": tot.reusedAccepted.Load()} {
			if v == 0 {
				t.Errorf("%d schedules ran no %s", n, name)
			}
		}
	}
	for name, v := range map[string]int64{
		"accepted stale writes": tot.staleAccepted.Load(), "accepted forged grants": tot.forgedAccepted.Load(),
		"accepted skipped segments": tot.skippedAccepted.Load(), "accepted regressed tokens": tot.regressedAccepted.Load(),
		"failed checks that changed state": tot.failedChanged.Load(), "model mismatches": tot.mismatches.Load(),
	} {
		if v != 0 {
			t.Errorf("%s: %d, want 0", name, v)
		}
	}
}

type scheduleStats struct {
	schedules, applies, accepted, replays, refused, attacksRefused, staleRefused, regressions, quarantined, lostAcks atomic.Int64
	staleAccepted, forgedAccepted, skippedAccepted, regressedAccepted, failedChanged, mismatches                     atomic.Int64
	prunes, prunedReceipts, filterRebuilds, guardReopens, duplicateOps, reusedAccepted                               atomic.Int64
}

func (s *scheduleStats) add(o *scheduleStats) {
	for _, p := range [][2]*atomic.Int64{
		{&s.schedules, &o.schedules}, {&s.applies, &o.applies}, {&s.accepted, &o.accepted}, {&s.replays, &o.replays},
		{&s.refused, &o.refused}, {&s.attacksRefused, &o.attacksRefused}, {&s.staleRefused, &o.staleRefused},
		{&s.regressions, &o.regressions}, {&s.quarantined, &o.quarantined}, {&s.lostAcks, &o.lostAcks},
		{&s.staleAccepted, &o.staleAccepted}, {&s.forgedAccepted, &o.forgedAccepted}, {&s.skippedAccepted, &o.skippedAccepted},
		{&s.regressedAccepted, &o.regressedAccepted}, {&s.failedChanged, &o.failedChanged}, {&s.mismatches, &o.mismatches},
		{&s.prunes, &o.prunes}, {&s.prunedReceipts, &o.prunedReceipts}, {&s.filterRebuilds, &o.filterRebuilds}, {&s.guardReopens, &o.guardReopens},
		{&s.duplicateOps, &o.duplicateOps}, {&s.reusedAccepted, &o.reusedAccepted},
	} {
		p[0].Add(p[1].Load())
	}
}

// issuerState is one lock service's counter for one resource. Restoring a
// snapshot of it is how the schedule makes tokens regress.
type issuerState struct{ epoch, inc, counter uint64 }

// msg is a mutation in flight with what the schedule knows about it.
type msg struct {
	m Mutation
	// grant is the grant as signed (for an attack, what the attacker started
	// from); keyID the key that signed it.
	grant Grant
	keyID string
	// attack marks a forgery, replay or impersonation: it must never be
	// accepted. macBroken marks one whose bytes no key ring key signed.
	attack, macBroken bool
	label             string
}

type holding struct {
	signed []byte
	grant  Grant
	keyID  string
	next   uint64 // next segment number
}

type schedule struct {
	rng    *rand.Rand
	seed   uint64
	db     *pebble.DB
	g      *Guard
	ring   *KeyRing
	prefix []byte
	domain string // GuardOptions.Domain, "" or "A"
	opts   GuardOptions

	resources []string
	owners    []string
	issuers   map[string]*issuerState // by resource, domain A
	snapshots map[string]issuerState
	issuerEp  uint64
	keySeq    int
	// model state
	revoked map[uint64]bool
	retired map[string]bool
	model   map[string]*modelResource
	truth   map[string]*truthResource

	holds   map[[2]string]*holding // (owner, resource)
	history []*holding             // every grant ever issued, for paused/stale owners
	net     []*msg
	opSeq   int
	sentOps map[string][]string // by resource, every operation ID sent

	stats   scheduleStats
	events  []string
	failure string
}

// modelResource is the reference model of the acceptance rules, written
// from the package doc, independent of the Guard's code paths.
type modelResource struct {
	bound    bool
	domain   string
	scope    Scope
	highest  Token
	root     [32]byte
	lastSeg  uint64
	accepted uint64
	byTok    map[Token]map[uint64]Receipt
	ops      map[string]Receipt
	// prunedBelow is the highest fence the resource was pruned below: the
	// receipts under lower fences are gone from byTok and ops.
	prunedBelow Token
}

// truthResource is ground truth for the release gate: what was accepted.
type truthResource struct {
	maxTok   Token
	maxRoot  [32]byte
	lastSeg  uint64
	accepted uint64
	last     []byte // payload of the last accepted write
}

func runSchedule(db *pebble.DB, seed uint64) *schedule {
	s := &schedule{
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), seed: seed, db: db,
		prefix:    []byte(fmt.Sprintf("s%d/", seed)),
		resources: []string{"r0", "r1"}, owners: []string{"o0", "o1", "o2"},
		issuers: map[string]*issuerState{}, snapshots: map[string]issuerState{},
		revoked: map[uint64]bool{}, retired: map[string]bool{},
		model: map[string]*modelResource{}, truth: map[string]*truthResource{},
		holds: map[[2]string]*holding{}, issuerEp: 1, sentOps: map[string][]string{},
	}
	s.stats.schedules.Add(1)
	if s.rng.IntN(2) == 0 {
		s.domain = "A"
	}
	s.ring = NewKeyRing()
	s.addKey()
	s.opts = GuardOptions{Prefix: append(bytes.Clone(s.prefix), 'g', '/'), Domain: s.domain, MaxQuarantine: 1000}
	if s.rng.IntN(2) == 0 {
		s.opts.OpIndexBytes = 64 // one block: full at once, so "maybe" often needs the index
	}
	g, err := NewGuard(db, s.ring, s.opts)
	if err != nil {
		s.failure = err.Error()
		return s
	}
	s.g = g
	for _, r := range s.resources {
		s.issuers[r] = &issuerState{epoch: 1, inc: 1}
		s.model[r] = &modelResource{byTok: map[Token]map[uint64]Receipt{}, ops: map[string]Receipt{}}
		s.truth[r] = &truthResource{}
	}
	steps := 30 + s.rng.IntN(40)
	for i := 0; i < steps && s.failure == ""; i++ {
		s.step()
	}
	for len(s.net) > 0 && s.failure == "" {
		s.deliver(s.rng.IntN(len(s.net)), false)
	}
	if s.failure == "" {
		s.checkBusiness()
	}
	return s
}

func (s *schedule) event(format string, args ...any) {
	s.events = append(s.events, fmt.Sprintf(format, args...))
}

func (s *schedule) lastEvents() []string {
	if len(s.events) > 25 {
		return s.events[len(s.events)-25:]
	}
	return s.events
}

func (s *schedule) fail(format string, args ...any) {
	if s.failure == "" {
		s.failure = fmt.Sprintf(format, args...)
	}
}

func (s *schedule) addKey() {
	s.keySeq++
	secret := make([]byte, 32)
	for i := range secret {
		secret[i] = byte(s.rng.Uint32())
	}
	if err := s.ring.Add(fmt.Sprintf("k%d", s.keySeq), secret); err != nil {
		s.fail("add key: %v", err)
	}
}

func (s *schedule) pick(xs []string) string { return xs[s.rng.IntN(len(xs))] }

func (s *schedule) step() {
	switch p := s.rng.IntN(100); {
	case p < 14:
		s.acquire(s.pick(s.owners), s.pick(s.resources))
	case p < 40:
		s.write(s.pick(s.owners), s.pick(s.resources))
	case p < 62:
		if len(s.net) > 0 {
			s.deliver(s.rng.IntN(len(s.net)), s.rng.IntN(5) == 0)
		}
	case p < 68:
		s.resend()
	case p < 73:
		s.staleWrite()
	case p < 82:
		s.attack()
	case p < 84:
		s.prune(s.pick(s.resources))
	case p < 85:
		g, err := NewGuard(s.db, s.ring, s.opts)
		if err != nil {
			s.fail("reopen the Guard: %v", err)
			return
		}
		s.g = g
		s.stats.guardReopens.Add(1)
		s.event("reopen the Guard")
	case p < 88:
		r := s.pick(s.resources)
		is := s.issuers[r]
		is.inc++ // the home restarts: a new incarnation, counter from 1
		is.counter = 0
		s.event("issuer restart %s -> e%d.i%d", r, is.epoch, is.inc)
	case p < 91:
		r := s.pick(s.resources)
		s.snapshots[r] = *s.issuers[r]
		s.event("snapshot issuer %s at %+v", r, *s.issuers[r])
	case p < 94:
		r := s.pick(s.resources)
		if snap, ok := s.snapshots[r]; ok {
			*s.issuers[r] = snap // an old coordination snapshot is restored
			s.event("RESTORE issuer %s to %+v", r, snap)
		}
	case p < 96:
		if err := s.ring.Revoke(s.issuerEp); err != nil {
			s.fail("revoke: %v", err)
		}
		s.revoked[s.issuerEp] = true
		s.event("revoke issuer epoch %d", s.issuerEp)
		s.issuerEp++
	case p < 98:
		s.addKey()
		s.event("rotate to key k%d", s.keySeq)
	default:
		if old := s.keySeq - 1; old >= 1 && !s.retired[fmt.Sprintf("k%d", old)] {
			id := fmt.Sprintf("k%d", old)
			if err := s.ring.Retire(id); err != nil {
				s.fail("retire: %v", err)
			}
			s.retired[id] = true
			s.event("retire key %s", id)
		}
	}
}

func (s *schedule) sign(g Grant) ([]byte, string) {
	id := s.ring.SigningKeyID()
	signed, err := s.ring.Sign(g)
	if err != nil {
		s.fail("sign: %v", err)
	}
	return signed, id
}

func (s *schedule) acquire(owner, r string) {
	is := s.issuers[r]
	is.counter++
	g := Grant{Resource: r, Owner: owner, RequestID: fmt.Sprintf("req-%d", s.opSeq), Lease: fmt.Sprintf("lease-%d", s.rng.Uint32()),
		Token: Token{Epoch: is.epoch, Incarnation: is.inc, Counter: is.counter}, IssuerEpoch: s.issuerEp, Domain: "A", TTL: time.Second, Operation: "write", Scope: ScopeCluster}
	s.opSeq++
	signed, id := s.sign(g)
	h := &holding{signed: signed, grant: g, keyID: id, next: 1}
	// The previous holding is not released: a paused owner keeps it.
	s.holds[[2]string{owner, r}] = h
	s.history = append(s.history, h)
	s.event("grant %s %s %s", owner, r, g.Token)
}

func (s *schedule) newMsg(h *holding, seg uint64, label string) *msg {
	s.opSeq++
	payload := []byte(fmt.Sprintf("p%d", s.rng.IntN(1000)))
	return &msg{
		m: Mutation{Signed: h.signed, Resource: h.grant.Resource, Owner: h.grant.Owner, Operation: "write",
			OpID: fmt.Sprintf("op%d", s.opSeq), Segment: seg, Payload: payload},
		grant: h.grant, keyID: h.keyID, label: label,
	}
}

func (s *schedule) write(owner, r string) {
	h := s.holds[[2]string{owner, r}]
	if h == nil {
		return
	}
	// Occasionally a segment is computed out of order and sent early.
	seg := h.next
	if s.rng.IntN(8) == 0 {
		seg++
	}
	h.next++
	m := s.newMsg(h, seg, "write")
	if ops := s.sentOps[r]; len(ops) > 0 && s.rng.IntN(4) == 0 {
		// An owner that took the resource over sends again an operation
		// whose outcome it does not know: the Guard must refuse it if any
		// kept receipt has it (F7), and may take it if it was pruned.
		m.m.OpID, m.label = ops[s.rng.IntN(len(ops))], "reused-op"
	}
	s.sentOps[r] = append(s.sentOps[r], m.m.OpID)
	s.net = append(s.net, m)
	s.event("send %s %s %s seg %d %s", owner, r, h.grant.Token, seg, m.m.OpID)
}

// resend re-sends a message already sent: the same bytes, or, sometimes, the
// same segment with another payload or operation ID.
func (s *schedule) resend() {
	if len(s.history) == 0 {
		return
	}
	h := s.history[s.rng.IntN(len(s.history))]
	if h.next <= 1 {
		return
	}
	seg := 1 + s.rng.Uint64N(h.next-1)
	m := s.newMsg(h, seg, "resend-conflict")
	if s.rng.IntN(3) != 0 {
		// Exactly the original: the model knows its opID and payload.
		if rc, ok := s.model[h.grant.Resource].byTok[h.grant.Token][seg]; ok && s.grantRootIs(h, rc.Root) {
			if orig := s.findPayload(rc); orig != nil {
				m.m.OpID, m.m.Payload, m.label = rc.OpID, orig, "resend-dup"
			}
		}
	}
	s.net = append(s.net, m)
	s.event("%s %s %s seg %d %s", m.label, h.grant.Resource, h.grant.Token, seg, m.m.OpID)
}

func (s *schedule) grantRootIs(h *holding, root [32]byte) bool { return h.grant.Root() == root }

// payloads remembers the payload of every accepted receipt, by digest.
var payloadByDigest sync.Map

func (s *schedule) findPayload(rc Receipt) []byte {
	if v, ok := payloadByDigest.Load(rc.PayloadDigest); ok {
		return v.([]byte)
	}
	return nil
}

// staleWrite is a paused owner waking up: it writes with any grant it ever
// held, at any segment.
func (s *schedule) staleWrite() {
	if len(s.history) == 0 {
		return
	}
	h := s.history[s.rng.IntN(len(s.history))]
	m := s.newMsg(h, 1+s.rng.Uint64N(4), "paused-owner")
	s.net = append(s.net, m)
	s.event("paused owner %s %s %s seg %d", h.grant.Owner, h.grant.Resource, h.grant.Token, m.m.Segment)
}

// prune prunes r below the token of a grant ever issued for it, which may
// lie above its highest fence, and sometimes rebuilds the operation filter
// after it. The model drops the receipts below the fence; what it then
// predicts for them (a pruned operation ID is new again, a regressed token
// below the fence is only stale, Receipt says ErrPruned) the deliveries and
// lost acknowledgements check.
func (s *schedule) prune(r string) {
	var below Token
	if mr := s.model[r]; mr.bound && s.rng.IntN(2) == 0 {
		below = mr.highest // keep only the current fence's receipts
	} else {
		for _, h := range s.history {
			if h.grant.Resource == r && (below.IsZero() || s.rng.IntN(2) == 0) {
				below = h.grant.Token
			}
		}
	}
	if below.IsZero() {
		return
	}
	n, err := s.g.Prune(context.Background(), r, below)
	s.event("prune %s below %s -> %d, %v", r, below, n, errOrOK(err))
	mr := s.model[r]
	switch {
	case !mr.bound:
		if n != 0 || err != nil {
			s.fail("Prune of %s, which accepted nothing, = %d, %v", r, n, err)
		}
		return
	case below.Compare(mr.highest) > 0:
		if !errors.Is(err, ErrPruneAboveHighest) {
			s.fail("Prune of %s below %s, above its highest %s = %d, %v", r, below, mr.highest, n, err)
		}
		return
	case err != nil:
		s.fail("Prune of %s below %s: %v", r, below, err)
		return
	}
	if mr.prunedBelow.Less(below) {
		mr.prunedBelow = below
	}
	want := 0
	for tok, segs := range mr.byTok {
		if tok.Less(mr.prunedBelow) {
			for _, rc := range segs {
				delete(mr.ops, rc.OpID)
				want++
			}
			delete(mr.byTok, tok)
		}
	}
	if n != want {
		s.fail("Prune of %s below %s deleted %d receipts; the model had %d below it", r, below, n, want)
	}
	s.stats.prunes.Add(1)
	s.stats.prunedReceipts.Add(int64(n))
	if s.rng.IntN(2) == 0 {
		if err := s.g.rebuildOpFilter(context.Background()); err != nil {
			s.fail("rebuild the operation filter: %v", err)
		}
		s.stats.filterRebuilds.Add(1)
		s.event("rebuild the operation filter")
	}
}

func (s *schedule) attack() {
	if len(s.history) == 0 {
		return
	}
	h := s.history[s.rng.IntN(len(s.history))]
	m := s.newMsg(h, 1+s.rng.Uint64N(3), "")
	m.attack = true
	kind := s.rng.IntN(7)
	if kind >= 5 && s.domain == "" && !s.model[h.grant.Resource].bound {
		// On an unbound resource of a Guard without a domain, the first grant
		// binds whatever domain and scope it has: that is not an attack.
		kind = 0
	}
	switch kind {
	case 0: // flip bits anywhere in the signed grant
		b := bytes.Clone(h.signed)
		b[s.rng.IntN(len(b))] ^= byte(1 + s.rng.IntN(255))
		m.m.Signed, m.macBroken, m.label = b, true, "tampered"
	case 1: // raise the token inside an honest grant
		b := bytes.Clone(h.signed)
		i := bytes.Index(b, grantToken(h.grant.Token))
		copy(b[i:], grantToken(Token{Epoch: math.MaxUint64, Incarnation: math.MaxUint64, Counter: math.MaxUint64}))
		m.m.Signed, m.macBroken, m.label = b, true, "oversized-token"
	case 2: // sign with a key the ring does not hold, under its key ID
		evil := NewKeyRing()
		_ = evil.Add(s.ring.SigningKeyID(), attackerKey)
		g := h.grant
		g.Token = Token{Epoch: math.MaxUint64}
		m.m.Signed, _ = evil.Sign(g)
		m.macBroken, m.label = true, "forged-key"
	case 3: // replay a valid proof on the other resource
		for _, r := range s.resources {
			if r != h.grant.Resource {
				m.m.Resource = r
			}
		}
		m.label = "cross-resource"
	case 4: // impersonate another owner with a valid proof
		for _, o := range s.owners {
			if o != h.grant.Owner {
				m.m.Owner = o
			}
		}
		m.label = "impersonation"
	case 5: // a foreign domain's lock service, sharing the trust bundle
		g := h.grant
		g.Domain, g.Token = "B", Token{Epoch: g.Token.Epoch + 1, Incarnation: 1, Counter: 1}
		m.m.Signed, m.keyID = s.sign(g)
		m.grant, m.label = g, "foreign-domain"
	default: // a node-scope grant from this domain
		g := h.grant
		g.Scope, g.Token = ScopeNode, Token{Epoch: g.Token.Epoch + 1, Incarnation: 1, Counter: 1}
		m.m.Signed, m.keyID = s.sign(g)
		m.grant, m.label = g, "node-scope"
	}
	s.net = append(s.net, m)
	s.event("attack %s on %s (%s)", m.label, m.m.Resource, h.grant.Token)
}

// expect is the reference model: the outcome the rules give, as the sentinel
// error or, for nil, the receipt and whether it is a replay.
func (s *schedule) expect(x *msg) (Receipt, bool, error) {
	gr, m := &x.grant, &x.m
	switch {
	case x.macBroken || s.retired[x.keyID]:
		return Receipt{}, false, ErrBadGrant
	case s.revoked[gr.IssuerEpoch]:
		return Receipt{}, false, ErrRevoked
	case gr.Resource != m.Resource || gr.Owner != m.Owner:
		return Receipt{}, false, ErrBadGrant
	case gr.Scope == ScopeNode && s.domain != "":
		return Receipt{}, false, ErrForeignDomain
	}
	mr := s.model[m.Resource]
	if !mr.bound && s.domain != "" && gr.Domain != s.domain {
		return Receipt{}, false, ErrForeignDomain
	}
	if mr.bound && (gr.Domain != mr.domain || gr.Scope != mr.scope) {
		return Receipt{}, false, ErrForeignDomain
	}
	root := gr.Root()
	c := gr.Token.Compare(mr.highest)
	switch {
	case c < 0:
		for _, rc := range mr.byTok[gr.Token] {
			if rc.Root != root {
				return Receipt{}, false, ErrFenceRegression
			}
		}
		return Receipt{}, false, ErrStaleOwner
	case c == 0:
		if root != mr.root {
			return Receipt{}, false, ErrFenceRegression
		}
		if m.Segment <= mr.lastSeg {
			rc := mr.byTok[gr.Token][m.Segment]
			if rc.OpID == m.OpID && rc.PayloadDigest == digestOf(m.Payload) {
				return rc, true, nil
			}
			return Receipt{}, false, ErrQuarantined
		}
		if m.Segment != mr.lastSeg+1 {
			return Receipt{}, false, ErrSegmentOrder
		}
	default:
		if m.Segment != 1 {
			return Receipt{}, false, ErrSegmentOrder
		}
	}
	if _, ok := mr.ops[m.OpID]; ok {
		return Receipt{}, false, ErrDuplicateOp
	}
	return Receipt{Resource: m.Resource, OpID: m.OpID, Token: gr.Token, Segment: m.Segment, Root: root,
		PayloadDigest: digestOf(m.Payload), Seq: mr.accepted + 1}, false, nil
}

func (s *schedule) modelAccept(x *msg, rc Receipt) {
	mr := s.model[x.m.Resource]
	if !mr.bound {
		mr.bound, mr.domain, mr.scope = true, x.grant.Domain, x.grant.Scope
	}
	mr.highest, mr.root, mr.lastSeg, mr.accepted = rc.Token, rc.Root, rc.Segment, rc.Seq
	if mr.byTok[rc.Token] == nil {
		mr.byTok[rc.Token] = map[uint64]Receipt{}
	}
	mr.byTok[rc.Token][rc.Segment] = rc
	mr.ops[rc.OpID] = rc
}

func (s *schedule) dumpState() []byte {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: s.prefix, UpperBound: keyUpperBound(s.prefix)})
	if err != nil {
		s.fail("dump: %v", err)
		return nil
	}
	defer it.Close()
	quar := append(bytes.Clone(s.g.prefix), kindQuarantine)
	var out []byte
	for ok := it.First(); ok; ok = it.Next() {
		if bytes.HasPrefix(it.Key(), quar) {
			continue
		}
		out = appendU16Bytes(out, it.Key())
		out = append(out, it.Value()...)
		out = append(out, 0xff)
	}
	return out
}

func (s *schedule) bizKey(r string) []byte { return append(bytes.Clone(s.prefix), "biz/"+r...) }

func (s *schedule) deliver(i int, duplicate bool) {
	x := s.net[i]
	if !duplicate {
		s.net = append(s.net[:i], s.net[i+1:]...)
	}
	before := s.dumpState()
	quarBefore := s.g.quarCount.Load()
	wantRC, replay, want := s.expect(x)
	staged := false
	rc, err := s.g.Apply(context.Background(), x.m, func(b *pebble.Batch) error {
		staged = true
		if err := b.Set(s.bizKey(x.m.Resource), x.m.Payload, nil); err != nil {
			return err
		}
		return b.Set(append(s.bizKey(x.m.Resource), "/"+x.m.OpID...), x.m.Payload, nil)
	})
	s.stats.applies.Add(1)
	s.event("deliver %s %s %s/%s seg %d %s -> %v", x.label, x.m.OpID, x.m.Resource, x.m.Owner, x.m.Segment, x.grant.Token, errOrOK(err))

	if err != nil {
		s.stats.refused.Add(1)
		if x.attack {
			s.stats.attacksRefused.Add(1)
		}
		switch {
		case errors.Is(err, ErrStaleOwner):
			s.stats.staleRefused.Add(1)
		case errors.Is(err, ErrFenceRegression):
			s.stats.regressions.Add(1)
		case errors.Is(err, ErrQuarantined):
			s.stats.quarantined.Add(1)
		case errors.Is(err, ErrDuplicateOp):
			s.stats.duplicateOps.Add(1)
		}
		if !bytes.Equal(before, s.dumpState()) || staged {
			s.stats.failedChanged.Add(1)
			s.fail("F2: refused Apply (%v) changed stored state", err)
		}
		if grew := s.g.quarCount.Load() - quarBefore; grew != 0 && !(grew == 1 && errors.Is(err, ErrQuarantined)) {
			s.stats.failedChanged.Add(1)
			s.fail("quarantine log grew by %d on %v", grew, err)
		}
		if want == nil || !errors.Is(err, want) {
			s.stats.mismatches.Add(1)
			s.fail("model expects %v, guard says %v", errOrOK(want), err)
		}
		s.lostAck(x)
		return
	}

	// Accepted. Ground truth first, independent of the model.
	tr := s.truth[x.m.Resource]
	if rc.Seq <= tr.accepted {
		s.stats.replays.Add(1)
		if staged || !bytes.Equal(before, s.dumpState()) {
			s.stats.failedChanged.Add(1)
			s.fail("a replay changed stored state")
		}
	} else {
		s.stats.accepted.Add(1)
		if x.label == "reused-op" {
			s.stats.reusedAccepted.Add(1)
		}
		payloadByDigest.Store(rc.PayloadDigest, bytes.Clone(x.m.Payload))
		if x.attack {
			s.stats.forgedAccepted.Add(1)
			s.fail("accepted %s attack", x.label)
		}
		root := x.grant.Root()
		switch c := rc.Token.Compare(tr.maxTok); {
		case c < 0:
			s.stats.staleAccepted.Add(1)
			s.fail("accepted stale token %s below %s", rc.Token, tr.maxTok)
		case c == 0 && root != tr.maxRoot:
			s.stats.regressedAccepted.Add(1)
			s.fail("accepted token %s under a second grant", rc.Token)
		case c == 0 && rc.Segment != tr.lastSeg+1, c > 0 && rc.Segment != 1:
			s.stats.skippedAccepted.Add(1)
			s.fail("accepted segment %d of %s after %s segment %d", rc.Segment, rc.Token, tr.maxTok, tr.lastSeg)
		}
		if rc.Seq != tr.accepted+1 {
			s.fail("receipt seq %d after %d", rc.Seq, tr.accepted)
		}
		tr.maxTok, tr.maxRoot, tr.lastSeg, tr.accepted, tr.last = rc.Token, root, rc.Segment, rc.Seq, bytes.Clone(x.m.Payload)
	}
	if want != nil || rc != wantRC || replay != (rc.Seq <= s.model[x.m.Resource].accepted) {
		s.stats.mismatches.Add(1)
		s.fail("model expects %v %+v, guard accepted %+v", errOrOK(want), wantRC, rc)
	}
	if !replay {
		s.modelAccept(x, rc)
	}
	s.lostAck(x)
}

// lostAck sometimes drops the outcome and makes the sender ask Receipt, which
// must agree with what the model says was accepted for that operation.
func (s *schedule) lostAck(x *msg) {
	if s.rng.IntN(6) != 0 {
		return
	}
	s.stats.lostAcks.Add(1)
	got, err := s.g.Receipt(context.Background(), x.m.Resource, x.m.OpID)
	mr := s.model[x.m.Resource]
	want, ok := mr.ops[x.m.OpID]
	// A pruned resource cannot tell a pruned operation from one it never
	// took.
	none := ErrNoReceipt
	if !mr.prunedBelow.IsZero() {
		none = ErrPruned
	}
	switch {
	case ok && (err != nil || got != want):
		s.fail("Receipt(%s) = %+v, %v; model has %+v", x.m.OpID, got, err, want)
	case !ok && !errors.Is(err, none):
		s.fail("Receipt(%s) = %+v, %v; model has none, want %v", x.m.OpID, got, err, none)
	}
}

// checkBusiness: the business value of each resource is the last accepted
// write's, so no refused write reached the store.
func (s *schedule) checkBusiness() {
	for _, r := range s.resources {
		v, ok, err := s.g.get(s.bizKey(r))
		tr := s.truth[r]
		switch {
		case err != nil:
			s.fail("read business value: %v", err)
		case tr.accepted == 0 && ok, tr.accepted > 0 && !bytes.Equal(v, tr.last):
			s.fail("business value of %s is %q, last accepted write was %q", r, v, tr.last)
		}
	}
}

func digestOf(p []byte) [32]byte { return sha256.Sum256(p) }

func errOrOK(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}
