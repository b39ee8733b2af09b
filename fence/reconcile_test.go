package fence

import (
	"context"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

func TestReconcileOutcomes(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		mode Mode
		// run writes, and returns the lost operation and its fence.
		run  func(f *fixture) (opID string, sentUnder Token)
		want Outcome
		// wouldRefuse is the Receipt's WouldRefuse for an accepted outcome.
		wouldRefuse Reason
	}{
		{"accepted", ModeEnforce, func(f *fixture) (string, Token) {
			f.accepted(mut(f.grant(res, "A", tok(1, 1, 1)), res, "A", "lost", 1, "x"))
			return "lost", tok(1, 1, 1)
		}, OutcomeAccepted, ReasonNone},
		{"accepted, then superseded", ModeEnforce, func(f *fixture) (string, Token) {
			f.accepted(mut(f.grant(res, "A", tok(1, 1, 1)), res, "A", "lost", 1, "x"))
			f.accepted(mut(f.grant(res, "B", tok(1, 1, 2)), res, "B", "b", 1, "y"))
			return "lost", tok(1, 1, 1)
		}, OutcomeAccepted, ReasonNone},
		{"refused: a newer fence was accepted", ModeEnforce, func(f *fixture) (string, Token) {
			a := f.grant(res, "A", tok(1, 1, 1))
			f.accepted(mut(a, res, "A", "a1", 1, "x"))
			f.accepted(mut(f.grant(res, "B", tok(1, 1, 2)), res, "B", "b", 1, "y"))
			f.refused(mut(a, res, "A", "lost", 2, "z"), ErrStaleOwner)
			return "lost", tok(1, 1, 1)
		}, OutcomeRefused, ReasonNone},
		{"refused: never arrived, superseded", ModeEnforce, func(f *fixture) (string, Token) {
			f.accepted(mut(f.grant(res, "B", tok(1, 1, 2)), res, "B", "b", 1, "y"))
			return "lost", tok(1, 1, 1)
		}, OutcomeRefused, ReasonNone},
		{"never seen: its fence is still the highest", ModeEnforce, func(f *fixture) (string, Token) {
			f.accepted(mut(f.grant(res, "A", tok(1, 1, 1)), res, "A", "a1", 1, "x"))
			return "lost", tok(1, 1, 1)
		}, OutcomeNeverSeen, ReasonNone},
		{"never seen: unknown resource", ModeEnforce, func(f *fixture) (string, Token) {
			return "lost", tok(1, 1, 1)
		}, OutcomeNeverSeen, ReasonNone},
		{"shadow: committed though stale", ModeShadow, func(f *fixture) (string, Token) {
			a := f.grant(res, "A", tok(1, 1, 1))
			f.accepted(mut(a, res, "A", "a1", 1, "x"))
			f.accepted(mut(f.grant(res, "B", tok(1, 1, 2)), res, "B", "b", 1, "y"))
			rc, err := f.apply(mut(a, res, "A", "lost", 2, "z"))
			must.NoError(f.t, err)
			must.Equal(f.t, ReasonStaleOwner, rc.WouldRefuse)
			return "lost", tok(1, 1, 1)
		}, OutcomeAccepted, ReasonStaleOwner},
		{"shadow: superseded proves nothing", ModeShadow, func(f *fixture) (string, Token) {
			f.accepted(mut(f.grant(res, "B", tok(1, 1, 2)), res, "B", "b", 1, "y"))
			return "lost", tok(1, 1, 1)
		}, OutcomeNeverSeen, ReasonNone},
		{"enforced after an unlogged shadow commit", ModeShadow, func(f *fixture) (string, Token) {
			a := f.grant(res, "A", tok(1, 1, 1))
			f.accepted(mut(a, res, "A", "a1", 1, "x"))
			f.accepted(mut(f.grant(res, "B", tok(1, 1, 2)), res, "B", "b", 1, "y"))
			f.g.maxShadow = 0 // the log is full
			_, err := f.apply(mut(a, res, "A", "lost", 2, "z"))
			must.NoError(f.t, err)
			must.NoError(f.t, f.g.SetMode(context.Background(), res, ModeEnforce))
			return "lost", tok(1, 1, 1)
		}, OutcomeNeverSeen, ReasonNone},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, GuardOptions{DefaultMode: c.mode})
			opID, sent := c.run(f)
			got, err := f.g.Reconcile(ctx, res, opID, sent)
			must.NoError(t, err)
			check.Equal(t, c.want, got.Outcome)
			check.Equal(t, f.highest(res), got.Highest)
			if c.want == OutcomeAccepted {
				check.Equal(t, opID, got.Receipt.OpID)
				check.Equal(t, sent, got.Receipt.Token)
				check.Equal(t, c.wouldRefuse, got.Receipt.WouldRefuse)
				if c.wouldRefuse == ReasonNone {
					rc, err := f.g.Receipt(ctx, res, opID)
					must.NoError(t, err)
					check.Equal(t, rc, got.Receipt)
				}
			}
		})
	}
	f := newFixture(t, GuardOptions{})
	_, err := f.g.Reconcile(ctx, "", "op", tok(1, 1, 1))
	check.ErrorIs(t, err, ErrBadMutation)
	_, err = f.g.Reconcile(ctx, res, string(make([]byte, MaxNameLen+1)), tok(1, 1, 1))
	check.ErrorIs(t, err, ErrTooLarge)
}

// The store crashes between a write's commit and its acknowledgement, or
// before the commit; the worker that takes over fences, reconciles, and does
// the operation exactly once either way.
func TestReconcileAcrossCrash(t *testing.T) {
	ctx := context.Background()
	ring := newRing(t)
	opts := GuardOptions{Prefix: []byte(testPrefix)}
	for _, c := range []struct {
		name      string
		committed bool // the crash came after the commit
		want      Outcome
	}{
		{"crash between commit and acknowledgement", true, OutcomeAccepted},
		{"crash before the commit", false, OutcomeRefused},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := vfs.NewCrashableMem()
			db := openPebble(t, fs, "db")
			g, err := NewGuard(db, ring, opts)
			must.NoError(t, err)
			a := sign(t, ring, baseGrant(res, "A", tok(1, 1, 1)))
			_, err = g.Apply(ctx, mut(a, res, "A", "a1", 1, "first"), nil)
			must.NoError(t, err)

			var crashed *vfs.MemFS
			lost := mut(a, res, "A", "settle", 2, "the lost write")
			rc, err := g.Apply(ctx, lost, func(b *pebble.Batch) error {
				if !c.committed {
					crashed = fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
				}
				return b.Set([]byte("biz/settle"), lost.Payload, nil)
			})
			must.NoError(t, err)
			if c.committed {
				crashed = fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
			}
			// rc never reached A: the acknowledgement is lost with the node.
			must.NoError(t, db.Close())

			db = openPebble(t, crashed, "db")
			defer db.Close()
			g, err = NewGuard(db, ring, opts)
			must.NoError(t, err)
			// B takes over: it fences first, so that no copy of A's write
			// still in flight can commit behind its answer.
			b := sign(t, ring, baseGrant(res, "B", tok(1, 1, 2)))
			_, err = g.Apply(ctx, mut(b, res, "B", "takeover-b", 1, ""), nil)
			must.NoError(t, err)
			got, err := g.Reconcile(ctx, res, "settle", tok(1, 1, 1))
			must.NoError(t, err)
			must.Equal(t, c.want, got.Outcome)
			switch got.Outcome {
			case OutcomeAccepted:
				check.Equal(t, rc, got.Receipt)
			case OutcomeRefused:
				_, err = g.Apply(ctx, mut(b, res, "B", "settle", 2, "redone by B"), func(bt *pebble.Batch) error {
					return bt.Set([]byte("biz/settle"), []byte("redone by B"), nil)
				})
				must.NoError(t, err)
			}
			// A comes back and resends: refused, the operation is done once.
			_, err = g.Apply(ctx, lost, nil)
			check.ErrorIs(t, err, ErrStaleOwner)
			n := 0
			for _, r := range []string{"takeover-b", "settle"} {
				if _, err := g.Receipt(ctx, res, r); err == nil {
					n++
				}
			}
			check.Equal(t, 2, n)
		})
	}
}
