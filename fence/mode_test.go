package fence

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// refusalCase sets up a resource so that the mutation it returns fails
// exactly one rule, and returns a mutation that is valid afterwards (above
// every honest fence, below every forged one).
type refusalCase struct {
	reason Reason
	setup  func(f *fixture) (bad, next Mutation)
}

var refusalCases = []refusalCase{
	{ReasonBadGrant, func(f *fixture) (Mutation, Mutation) {
		f.accepted(mut(f.grant(res, "A", tok(1, 1, 1)), res, "A", "a", 1, "a"))
		evil := NewKeyRing()
		must.NoError(f.t, evil.Add("k1", attackerKey))
		forged, err := evil.Sign(baseGrant(res, "M", tok(math.MaxUint64, math.MaxUint64, math.MaxUint64)))
		must.NoError(f.t, err)
		return mut(forged, res, "M", "m", 1, "forged"), mut(f.grant(res, "B", tok(1, 1, 2)), res, "B", "b", 1, "b")
	}},
	{ReasonBadGrant, func(f *fixture) (Mutation, Mutation) { // a proof for another resource
		other := f.grant("other", "M", tok(9, 9, 9))
		return mut(other, res, "M", "m", 1, "replayed"), mut(f.grant(res, "B", tok(1, 1, 2)), res, "B", "b", 1, "b")
	}},
	{ReasonRevoked, func(f *fixture) (Mutation, Mutation) {
		g := f.grant(res, "A", tok(5, 1, 1), func(g *Grant) { g.IssuerEpoch = 37 })
		must.NoError(f.t, f.ring.Revoke(37))
		return mut(g, res, "A", "a", 1, "revoked"), mut(f.grant(res, "B", tok(1, 1, 2)), res, "B", "b", 1, "b")
	}},
	{ReasonForeignDomain, func(f *fixture) (Mutation, Mutation) {
		f.accepted(mut(f.grant(res, "A", tok(1, 1, 1)), res, "A", "a", 1, "a"))
		foreign := f.grant(res, "M", tok(8, 1, 1), func(g *Grant) { g.Domain = "cluster-b" })
		return mut(foreign, res, "M", "m", 1, "foreign"), mut(f.grant(res, "B", tok(1, 1, 2)), res, "B", "b", 1, "b")
	}},
	{ReasonMigrationPending, func(f *fixture) (Mutation, Mutation) {
		f.accepted(mut(f.grant(res, "A", tok(3, 1, 1)), res, "A", "a", 1, "a"))
		must.NoError(f.t, f.g.Migrate(context.Background(), res, "cluster-a", "cluster-b"))
		low := f.grant(res, "M", tok(2, 1, 1), func(g *Grant) { g.Domain = "cluster-b" })
		return mut(low, res, "M", "m", 1, "low"), mut(f.grant(res, "B", tok(4, 1, 1), func(g *Grant) { g.Domain = "cluster-b" }), res, "B", "b", 1, "b")
	}},
	{ReasonStaleOwner, func(f *fixture) (Mutation, Mutation) {
		a := f.grant(res, "A", tok(1, 1, 1))
		f.accepted(mut(a, res, "A", "a1", 1, "a1"))
		b := f.grant(res, "B", tok(1, 1, 2))
		f.accepted(mut(b, res, "B", "b1", 1, "b1"))
		return mut(a, res, "A", "a2", 2, "stale"), mut(b, res, "B", "b2", 2, "b2")
	}},
	{ReasonFenceRegression, func(f *fixture) (Mutation, Mutation) {
		b := f.grant(res, "B", tok(1, 1, 2))
		f.accepted(mut(b, res, "B", "b1", 1, "b1"))
		again := f.grant(res, "D", tok(1, 1, 2))
		return mut(again, res, "D", "d", 1, "re-minted"), mut(b, res, "B", "b2", 2, "b2")
	}},
	{ReasonSegmentOrder, func(f *fixture) (Mutation, Mutation) {
		a := f.grant(res, "A", tok(1, 1, 1))
		f.accepted(mut(a, res, "A", "a1", 1, "a1"))
		return mut(a, res, "A", "a3", 3, "skipped"), mut(a, res, "A", "a2", 2, "a2")
	}},
	{ReasonQuarantined, func(f *fixture) (Mutation, Mutation) {
		a := f.grant(res, "A", tok(1, 1, 1))
		f.accepted(mut(a, res, "A", "a1", 1, "a1"))
		return mut(a, res, "A", "a1", 1, "another payload"), mut(a, res, "A", "a2", 2, "a2")
	}},
	{ReasonDuplicateOp, func(f *fixture) (Mutation, Mutation) {
		f.accepted(mut(f.grant(res, "A", tok(1, 1, 1)), res, "A", "x", 1, "x"))
		b := f.grant(res, "B", tok(1, 1, 2))
		return mut(b, res, "B", "x", 1, "x again"), mut(b, res, "B", "y", 1, "y")
	}},
}

// fenceState is the stored fence (state, receipts, operation index): what a
// shadow-mode commit must leave alone.
func fenceState(tb testing.TB, db *pebble.DB, prefix []byte) []byte {
	tb.Helper()
	var out []byte
	for _, k := range []byte{kindState, kindReceipt, kindOp} {
		lower := append(append([]byte(nil), prefix...), k)
		it, err := db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: keyUpperBound(lower)})
		must.NoError(tb, err)
		for ok := it.First(); ok; ok = it.Next() {
			out = appendU16Bytes(out, it.Key())
			out = appendU16Bytes(out, it.Value())
		}
		must.NoError(tb, it.Close())
	}
	return out
}

// cacheVariants run a test with the Guard's cache and operation filter on
// (the hit path) and off (every record read from Pebble).
var cacheVariants = []struct {
	name string
	opts GuardOptions
}{{"cached", GuardOptions{}}, {"uncached", GuardOptions{CacheResources: -1, OpIndexBytes: -1}}}

func withMode(o GuardOptions, m Mode) GuardOptions { o.DefaultMode = m; return o }

func TestEveryRefusalReasonInEnforceMode(t *testing.T) {
	for _, v := range cacheVariants {
		t.Run(v.name, func(t *testing.T) { testEveryRefusalReasonInEnforceMode(t, v.opts) })
	}
}

func testEveryRefusalReasonInEnforceMode(t *testing.T, opts GuardOptions) {
	covered := map[Reason]bool{}
	for _, c := range refusalCases {
		t.Run(c.reason.String(), func(t *testing.T) {
			f := newFixture(t, opts)
			bad, next := c.setup(f)
			err := f.refused(bad, c.reason.Err())
			check.Equal(t, c.reason, ReasonOf(err))
			f.accepted(next)
			st, err := f.g.Stats(context.Background())
			must.NoError(t, err)
			check.Equal(t, uint64(1), st.Refused[c.reason])
			check.Equal(t, uint64(0), st.WouldRefuse.Total())
		})
		covered[c.reason] = true
	}
	for _, r := range Reasons() {
		check.True(t, covered[r], "no refusal case for %s", r)
	}
}

func TestEveryRefusalReasonInShadowMode(t *testing.T) {
	for _, v := range cacheVariants {
		t.Run(v.name, func(t *testing.T) { testEveryRefusalReasonInShadowMode(t, withMode(v.opts, ModeShadow)) })
	}
}

func testEveryRefusalReasonInShadowMode(t *testing.T, opts GuardOptions) {
	for _, c := range refusalCases {
		t.Run(c.reason.String(), func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t, opts)
			bad, next := c.setup(f)
			before := fenceState(t, f.db, f.g.prefix)
			quarantined, err := f.g.Quarantined(ctx, "")
			must.NoError(t, err)

			rc, err := f.apply(bad)
			must.NoError(t, err, "shadow mode refused")
			check.Equal(t, c.reason, rc.WouldRefuse)
			check.Equal(t, string(bad.Payload), f.value("biz/"+res), "shadow mode committed the business write")
			check.Equal(t, before, fenceState(t, f.db, f.g.prefix), "a shadow commit changed the fence state")
			after, err := f.g.Quarantined(ctx, "")
			must.NoError(t, err)
			check.Equal(t, len(quarantined), len(after), "a shadow commit wrote the quarantine log")

			infos, err := f.g.Resources(ctx)
			must.NoError(t, err)
			var in ResourceInfo
			for _, i := range infos {
				if i.Resource == res {
					in = i
				}
			}
			check.Equal(t, ModeShadow, in.Mode)
			check.Equal(t, uint64(1), in.WouldRefuse[c.reason])
			check.Equal(t, uint64(1), in.WouldRefuse.Total())
			log, err := f.g.WouldRefuse(ctx, res)
			must.NoError(t, err)
			must.Len(t, log, 1)
			check.Equal(t, bad.OpID, log[0].OpID)
			check.Equal(t, c.reason, log[0].Reason)
			st, err := f.g.Stats(ctx)
			must.NoError(t, err)
			check.Equal(t, uint64(1), st.WouldRefuse[c.reason])
			check.Equal(t, uint64(0), st.Refused.Total())

			// Enforced now, the resource judges as if the shadow commit had
			// never come: the same mutation is refused for the same reason,
			// and the valid one is accepted.
			must.NoError(t, f.g.SetMode(ctx, res, ModeEnforce))
			f.refused(bad, c.reason.Err())
			f.accepted(next)
		})
	}
}

// A shadow commit leaves the fence exactly as an enforcing Guard that refused
// the same mutation would: run both on the same script and compare.
func TestShadowFenceEqualsEnforceFence(t *testing.T) {
	for _, c := range refusalCases {
		t.Run(c.reason.String(), func(t *testing.T) {
			enf := newFixture(t, GuardOptions{})
			sh := newFixture(t, GuardOptions{DefaultMode: ModeShadow})
			// Both fixtures sign with the same key, so grants are identical.
			badE, nextE := c.setup(enf)
			badS, nextS := c.setup(sh)
			_, _ = enf.apply(badE)
			_, err := sh.apply(badS)
			must.NoError(t, err)
			enf.accepted(nextE)
			sh.accepted(nextS)
			check.Equal(t, fenceState(t, enf.db, enf.g.prefix), fenceState(t, sh.db, sh.g.prefix))
		})
	}
}

func TestShadowModeStillRefusesMalformedMutations(t *testing.T) {
	f := newFixture(t, GuardOptions{DefaultMode: ModeShadow})
	s := f.grant(res, "A", tok(1, 1, 1))
	f.refused(mut(s, res, "A", "", 1, ""), ErrBadMutation)
	f.refused(mut(s, res, "A", "a", 0, ""), ErrBadMutation)
	f.refused(mut(s, res, "A", string(make([]byte, MaxNameLen+1)), 1, ""), ErrTooLarge)
}

func TestModeTransitions(t *testing.T) {
	type step = modeStep
	for _, c := range []struct {
		name  string
		def   Mode
		steps []step
	}{
		{"default enforce: set enforce", ModeEnforce, []step{{ModeEnforce, nil, ModeEnforce, false}}},
		{"default enforce: shadow refused", ModeEnforce, []step{{ModeShadow, ErrEnforced, ModeEnforce, false}}},
		{"default shadow: enforce", ModeShadow, []step{{ModeEnforce, nil, ModeEnforce, true}}},
		{"default shadow: pin shadow", ModeShadow, []step{{ModeShadow, nil, ModeShadow, false}, {ModeShadow, nil, ModeShadow, false}}},
		{"shadow, enforce, back refused", ModeShadow, []step{{ModeShadow, nil, ModeShadow, false}, {ModeEnforce, nil, ModeEnforce, true}, {ModeShadow, ErrEnforced, ModeEnforce, false}, {ModeEnforce, nil, ModeEnforce, false}}},
		{"no off mode", ModeShadow, []step{{Mode(0), ErrBadMode, ModeShadow, false}, {Mode(3), ErrBadMode, ModeShadow, false}}},
		{"no off mode once enforced", ModeEnforce, []step{{Mode(0), ErrBadMode, ModeEnforce, false}, {Mode(255), ErrBadMode, ModeEnforce, false}}},
	} {
		for _, v := range cacheVariants {
			t.Run(c.name+"/"+v.name, func(t *testing.T) { testModeSteps(t, withMode(v.opts, c.def), c.steps) })
		}
	}
}

type modeStep struct {
	set     Mode
	want    error // nil: accepted
	mode    Mode  // the mode after
	enforce bool  // EnforcedAt recorded by this step
}

func testModeSteps(t *testing.T, opts GuardOptions, steps []modeStep) {
	ctx := context.Background()
	f := newFixture(t, opts)
	a := f.grant(res, "A", tok(1, 1, 1))
	f.accepted(mut(a, res, "A", "a1", 1, "a1"))
	for i, s := range steps {
		before := fenceState(t, f.db, f.g.prefix)
		err := f.g.SetMode(ctx, res, s.set)
		if s.want == nil {
			must.NoError(t, err, "step %d", i)
		} else {
			must.ErrorIs(t, err, s.want, "step %d", i)
		}
		check.Equal(t, before, fenceState(t, f.db, f.g.prefix), "SetMode changed the fence state")
		in := f.info(res)
		check.Equal(t, s.mode, in.Mode, "step %d", i)
		if s.enforce {
			check.Equal(t, uint64(1), in.EnforcedAt)
			check.Equal(t, tok(1, 1, 1), in.EnforcedHighest)
		}
		// And the Guard acts on it: a skipped segment is refused or
		// committed in shadow.
		skip := mut(a, res, "A", fmt.Sprintf("skip-%d", i), 99, "skipped")
		if s.mode == ModeEnforce {
			f.refused(skip, ErrSegmentOrder)
		} else {
			rc, err := f.apply(skip)
			must.NoError(t, err, "step %d", i)
			check.Equal(t, ReasonSegmentOrder, rc.WouldRefuse, "step %d", i)
		}
	}
	// Durable: a new Guard on the same store sees the same modes.
	want := f.info(res)
	opts.Prefix = []byte(testPrefix)
	g, err := NewGuard(f.db, f.ring, opts)
	must.NoError(t, err)
	f.g = g
	check.Equal(t, want, f.info(res))
}

func (f *fixture) info(res string) ResourceInfo {
	f.t.Helper()
	infos, err := f.g.Resources(context.Background())
	must.NoError(f.t, err)
	for _, in := range infos {
		if in.Resource == res {
			return in
		}
	}
	return ResourceInfo{}
}

func TestModeBeforeFirstWrite(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, GuardOptions{DefaultMode: ModeShadow})
	must.NoError(t, f.g.SetMode(ctx, res, ModeEnforce))
	in := f.info(res)
	check.Equal(t, ResourceInfo{Resource: res, Mode: ModeEnforce, ModeSet: true}, in)
	// Enforced before any write, the resource refuses from the first.
	f.refused(mut(f.grant(res, "A", tok(1, 1, 1)), res, "A", "a", 2, "a"), ErrSegmentOrder)
	// Another resource still follows the default.
	rc, err := f.apply(mut(f.grant("other", "A", tok(1, 1, 1)), "other", "A", "a", 2, "a"))
	must.NoError(t, err)
	check.Equal(t, ReasonSegmentOrder, rc.WouldRefuse)
}

func TestDefaultModeIsDurable(t *testing.T) {
	db := openMem(t)
	ring := newRing(t)
	open := func(m Mode) (*Guard, error) {
		return NewGuard(db, ring, GuardOptions{Prefix: []byte(testPrefix), DefaultMode: m})
	}
	g, err := open(ModeShadow)
	must.NoError(t, err)
	ctx := context.Background()
	must.NoError(t, g.SetMode(ctx, "pinned", ModeShadow))
	_, err = g.Apply(ctx, mut(sign(t, ring, baseGrant("r", "A", tok(1, 1, 1))), "r", "A", "a", 1, "a"), nil)
	must.NoError(t, err)
	// Shadow again is fine; then the default goes to enforce.
	_, err = open(ModeShadow)
	must.NoError(t, err)
	g, err = open(0) // zero is enforce
	must.NoError(t, err)
	check.Equal(t, ModeEnforce, g.defaultMode)
	// No way back, and a pinned resource stays in shadow.
	_, err = open(ModeShadow)
	check.ErrorIs(t, err, ErrEnforced)
	must.NoError(t, g.SetMode(ctx, "pinned", ModeShadow))
	check.ErrorIs(t, g.SetMode(ctx, "r", ModeShadow), ErrEnforced)
	_, err = open(Mode(9))
	check.ErrorIs(t, err, ErrBadMode)
}

// A store written before modes were stored was enforced; it stays so.
func TestDefaultModeOfAnOlderStore(t *testing.T) {
	f := newFixture(t, GuardOptions{})
	f.accepted(mut(f.grant(res, "A", tok(1, 1, 1)), res, "A", "a", 1, "a"))
	must.NoError(t, f.db.Delete(f.g.defaultModeKey(), pebble.Sync))
	_, err := NewGuard(f.db, f.ring, GuardOptions{Prefix: []byte(testPrefix), DefaultMode: ModeShadow})
	check.ErrorIs(t, err, ErrEnforced)
	// An empty store may start in shadow mode.
	_, err = NewGuard(f.db, f.ring, GuardOptions{Prefix: []byte("\x00other/"), DefaultMode: ModeShadow})
	check.NoError(t, err)
}

func TestParseMode(t *testing.T) {
	for s, want := range map[string]Mode{"shadow": ModeShadow, "enforce": ModeEnforce, "ENFORCE": ModeEnforce} {
		m, err := ParseMode(s)
		check.NoError(t, err)
		check.Equal(t, want, m)
		if err == nil {
			check.Equal(t, bytes.ToLower([]byte(s)), []byte(m.String()))
		}
	}
	for _, s := range []string{"off", "disabled", "none", "", "permissive"} {
		_, err := ParseMode(s)
		check.ErrorIs(t, err, ErrBadMode, "%q", s)
	}
}

// The shadow log is bounded; past it, commits are still counted.
func TestShadowLogBound(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, GuardOptions{DefaultMode: ModeShadow, MaxShadowLog: 2})
	a := f.grant(res, "A", tok(1, 1, 1))
	f.accepted(mut(a, res, "A", "a1", 1, "a1"))
	for _, op := range []string{"x", "y", "z", "x"} {
		rc, err := f.apply(mut(a, res, "A", op, 5, op))
		must.NoError(t, err)
		check.Equal(t, ReasonSegmentOrder, rc.WouldRefuse)
	}
	log, err := f.g.WouldRefuse(ctx, "")
	must.NoError(t, err)
	check.Len(t, log, 2)
	in := f.info(res)
	check.Equal(t, uint64(4), in.WouldRefuse[ReasonSegmentOrder])
	check.Equal(t, uint64(1), in.ShadowUnlogged)
}

func sign(tb testing.TB, r *KeyRing, g Grant) []byte {
	tb.Helper()
	s, err := r.Sign(g)
	must.NoError(tb, err)
	return s
}
