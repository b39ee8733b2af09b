package fence

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

func TestFirstGrantBindsDomain(t *testing.T) {
	f := newFixture(t, GuardOptions{})
	f.accepted(mut(f.grant(res, "A", tok(1, 1, 1), func(g *Grant) { g.Domain = "cluster-b" }), res, "A", "a", 1, "a"))
	f.refused(mut(f.grant(res, "B", tok(2, 1, 1)), res, "B", "b", 1, "b"), ErrForeignDomain)
	// Node-scope grants of the same domain are another lock service too.
	f.refused(mut(f.grant(res, "B", tok(2, 1, 1), func(g *Grant) { g.Domain = "cluster-b"; g.Scope = ScopeNode }), res, "B", "b", 1, "b"), ErrForeignDomain)
	infos, err := f.g.Resources(context.Background())
	must.NoError(t, err)
	check.Equal(t, []ResourceInfo{{Resource: res, Domain: "cluster-b", Scope: ScopeCluster, Highest: tok(1, 1, 1), LastSegment: 1, Accepted: 1, Mode: ModeEnforce}}, infos)
}

func TestBind(t *testing.T) {
	f := newFixture(t, GuardOptions{})
	ctx := context.Background()
	must.NoError(t, f.g.Bind(ctx, res, "cluster-b", ScopeCluster))
	must.NoError(t, f.g.Bind(ctx, res, "cluster-b", ScopeCluster))
	check.ErrorIs(t, f.g.Bind(ctx, res, "cluster-a", ScopeCluster), ErrForeignDomain)
	check.ErrorIs(t, f.g.Bind(ctx, res, "cluster-b", ScopeNode), ErrForeignDomain)
	f.refused(mut(f.grant(res, "A", tok(1, 1, 1)), res, "A", "a", 1, "a"), ErrForeignDomain)
	f.accepted(mut(f.grant(res, "A", tok(1, 1, 1), func(g *Grant) { g.Domain = "cluster-b" }), res, "A", "a", 1, "a"))
	check.ErrorIs(t, f.g.Bind(ctx, "", "d", ScopeCluster), ErrBadMutation)
	check.ErrorIs(t, f.g.Bind(ctx, "r", "d", 0), ErrBadMutation)
	check.ErrorIs(t, f.g.Bind(ctx, strings.Repeat("r", MaxResourceLen+1), "d", ScopeCluster), ErrTooLarge)
}

func TestClusterGuardRefusesNodeScope(t *testing.T) {
	f := newFixture(t, GuardOptions{Domain: "cluster-a"})
	ctx := context.Background()
	node := f.grant(res, "A", tok(1, 1, 1), func(g *Grant) { g.Scope = ScopeNode })
	f.refused(mut(node, res, "A", "a", 1, "a"), ErrForeignDomain)
	f.refused(mut(f.grant(res, "A", tok(1, 1, 1), func(g *Grant) { g.Domain = "cluster-b" }), res, "A", "a", 1, "a"), ErrForeignDomain)
	check.ErrorIs(t, f.g.Bind(ctx, res, "cluster-a", ScopeNode), ErrForeignDomain)
	check.ErrorIs(t, f.g.Bind(ctx, res, "cluster-b", ScopeCluster), ErrForeignDomain)
	f.accepted(mut(f.grant(res, "A", tok(1, 1, 1)), res, "A", "a", 1, "a"))
}

func TestNodeScopeResource(t *testing.T) {
	f := newFixture(t, GuardOptions{})
	f.accepted(mut(f.grant(res, "A", tok(1, 1, 1), func(g *Grant) { g.Scope = ScopeNode }), res, "A", "a", 1, "a"))
	f.refused(mut(f.grant(res, "B", tok(1, 1, 2)), res, "B", "b", 1, "b"), ErrForeignDomain)
	f.accepted(mut(f.grant(res, "B", tok(1, 1, 2), func(g *Grant) { g.Scope = ScopeNode }), res, "B", "b", 1, "b"))
}

// Seed 004: moving a resource to another lock service must continue above
// its highest fence; until the new service's tokens do, writes pause.
func TestMigrate(t *testing.T) {
	f := newFixture(t, GuardOptions{})
	ctx := context.Background()
	inB := func(g *Grant) { g.Domain = "cluster-b" }
	a := f.grant(res, "A", tok(5, 3, 100))
	f.accepted(mut(a, res, "A", "a1", 1, "a1"))
	check.ErrorIs(t, f.g.Migrate(ctx, res, "cluster-x", "cluster-b"), ErrForeignDomain, "from must match")
	check.ErrorIs(t, f.g.Migrate(ctx, "unbound", "cluster-a", "cluster-b"), ErrForeignDomain)
	must.NoError(t, f.g.Migrate(ctx, res, "cluster-a", "cluster-b"))

	infos, _ := f.g.Resources(ctx)
	check.Equal(t, "cluster-a", infos[0].MigratingFrom)
	check.Equal(t, "cluster-b", infos[0].Domain)
	// The old domain's holder is now foreign, even with its current grant.
	f.refused(mut(a, res, "A", "a2", 2, "a2"), ErrForeignDomain)
	// The new domain restarted its counters: its tokens are not above yet.
	f.refused(mut(f.grant(res, "B", tok(1, 1, 1), inB), res, "B", "b", 1, "b"), ErrMigrationPending)
	f.refused(mut(f.grant(res, "B", tok(5, 3, 100), inB), res, "B", "b", 1, "b"), ErrMigrationPending)
	// Once it continues above the old highest fence, writes resume.
	f.accepted(mut(f.grant(res, "B", tok(6, 1, 1), inB), res, "B", "b", 1, "b"))
	infos, _ = f.g.Resources(ctx)
	check.Equal(t, "", infos[0].MigratingFrom)
	check.Equal(t, tok(6, 1, 1), infos[0].Highest)
	f.refused(mut(f.grant(res, "C", tok(6, 1, 0), inB), res, "C", "c", 1, "c"), ErrStaleOwner)
	must.NoError(t, f.g.Migrate(ctx, res, "cluster-b", "cluster-b"))
}

func TestMutationBounds(t *testing.T) {
	f := newFixture(t, GuardOptions{MaxPayload: 16})
	s := f.grant(res, "A", tok(1, 1, 1))
	long := func(n int) string { return strings.Repeat("x", n) }
	for name, c := range map[string]struct {
		m    Mutation
		want error
	}{
		"payload":      {mut(s, res, "A", "a", 1, long(17)), ErrTooLarge},
		"resource":     {mut(s, long(MaxResourceLen+1), "A", "a", 1, ""), ErrTooLarge},
		"owner":        {mut(s, res, long(MaxNameLen+1), "a", 1, ""), ErrTooLarge},
		"op ID":        {mut(s, res, "A", long(MaxNameLen+1), 1, ""), ErrTooLarge},
		"empty op ID":  {mut(s, res, "A", "", 1, ""), ErrBadMutation},
		"empty owner":  {mut(s, res, "", "a", 1, ""), ErrBadMutation},
		"segment zero": {mut(s, res, "A", "a", 0, ""), ErrBadMutation},
		"no grant":     {mut(nil, res, "A", "a", 1, ""), ErrBadGrant},
	} {
		t.Run(name, func(t *testing.T) { f.refused(c.m, c.want) })
	}
	_, err := f.g.Receipt(context.Background(), res, long(MaxNameLen+1))
	check.ErrorIs(t, err, ErrTooLarge)
	for _, o := range []GuardOptions{{}, {Prefix: []byte(long(MaxPrefixLen + 1))}, {Prefix: []byte("p"), MaxPayload: MaxPayloadLimit + 1}, {Prefix: []byte("p"), Domain: long(MaxNameLen + 1)}} {
		_, err := NewGuard(f.db, f.ring, o)
		check.Error(t, err)
	}
}

func TestStageErrorCommitsNothing(t *testing.T) {
	f := newFixture(t, GuardOptions{})
	s := f.grant(res, "A", tok(1, 1, 1))
	before := dump(t, f.db, f.g.prefix)
	boom := errors.New("business rule refused")
	_, err := f.g.Apply(context.Background(), mut(s, res, "A", "a", 1, "a"), func(b *pebble.Batch) error {
		_ = b.Set([]byte("biz/half-written"), []byte("x"), nil)
		return boom
	})
	check.ErrorIs(t, err, boom)
	check.Equal(t, before, dump(t, f.db, f.g.prefix))
	f.accepted(mut(s, res, "A", "a", 1, "a"))
}

func TestApplyHonoursContext(t *testing.T) {
	f := newFixture(t, GuardOptions{})
	s := f.grant(res, "A", tok(1, 1, 1))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := f.g.Apply(ctx, mut(s, res, "A", "a", 1, "a"), nil)
	check.ErrorIs(t, err, context.Canceled)
	check.True(t, f.highest(res).IsZero())
}

// Owners racing on one resource: whatever the interleaving, the accepted
// tokens in commit order only grow (F1) and the business value is the last
// accepted owner's.
func TestConcurrentOwners(t *testing.T) {
	f := newFixture(t, GuardOptions{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				c := uint64(i*8 + w + 1)
				owner := string(rune('A' + w))
				s := f.grant(res, owner, tok(1, 1, c))
				_, err := f.apply(mut(s, res, owner, owner+"-"+string(rune('a'+i)), 1, owner))
				if err != nil && !errors.Is(err, ErrStaleOwner) {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	it, err := f.db.NewIter(&pebble.IterOptions{LowerBound: f.g.resourceKey(kindReceipt, res, 0), UpperBound: keyUpperBound(f.g.resourceKey(kindReceipt, res, 0))})
	must.NoError(t, err)
	defer it.Close()
	var lastSeq uint64
	for ok := it.First(); ok; ok = it.Next() {
		rc, err := decodeReceipt(res, it.Value())
		must.NoError(t, err)
		// Receipts sort by token; their commit sequence must sort the same way.
		check.True(t, rc.Seq > lastSeq, "token %s committed at %d after %d", rc.Token, rc.Seq, lastSeq)
		lastSeq = rc.Seq
	}
}
