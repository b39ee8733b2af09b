package fence

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// quietLogger keeps Pebble's info lines out of test output; a fatal error
// still fails loudly.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

func openPebble(tb testing.TB, fs vfs.FS, dir string) *pebble.DB {
	tb.Helper()
	db, err := pebble.Open(dir, &pebble.Options{FS: fs, Logger: quietLogger{}})
	must.NoError(tb, err)
	return db
}

func openMem(tb testing.TB) *pebble.DB {
	tb.Helper()
	db := openPebble(tb, vfs.NewMem(), "db")
	tb.Cleanup(func() { db.Close() })
	return db
}

var (
	testSecret1 = bytes.Repeat([]byte{0x11}, 32)
	testSecret2 = bytes.Repeat([]byte{0x22}, 32)
	attackerKey = bytes.Repeat([]byte{0x66}, 32)
)

const testPrefix = "\x00fence/"

func newRing(tb testing.TB) *KeyRing {
	tb.Helper()
	r := NewKeyRing()
	must.NoError(tb, r.Add("k1", testSecret1))
	return r
}

// fixture is one Guard on an in-memory Pebble with a key ring, and helpers
// that play the lock service (signing grants) and a store (staging a business
// write per mutation).
type fixture struct {
	t    testing.TB
	db   *pebble.DB
	ring *KeyRing
	g    *Guard
}

func newFixture(tb testing.TB, opts GuardOptions) *fixture {
	tb.Helper()
	if opts.Prefix == nil {
		opts.Prefix = []byte(testPrefix)
	}
	f := &fixture{t: tb, db: openMem(tb), ring: newRing(tb)}
	g, err := NewGuard(f.db, f.ring, opts)
	must.NoError(tb, err)
	f.g = g
	return f
}

func tok(e, i, c uint64) Token { return Token{Epoch: e, Incarnation: i, Counter: c} }

// baseGrant is a valid cluster grant; mods adjust it.
func baseGrant(res, owner string, t Token, mods ...func(*Grant)) Grant {
	g := Grant{
		Resource: res, Owner: owner, RequestID: "req-" + owner + "-" + t.String(),
		Lease: "lease-" + t.String(), Token: t, IssuerEpoch: 1, Domain: "cluster-a",
		TTL: 10 * time.Second, Operation: "write", Scope: ScopeCluster,
	}
	for _, m := range mods {
		m(&g)
	}
	return g
}

func (f *fixture) sign(g Grant) []byte {
	f.t.Helper()
	s, err := f.ring.Sign(g)
	must.NoError(f.t, err)
	return s
}

func (f *fixture) grant(res, owner string, t Token, mods ...func(*Grant)) []byte {
	return f.sign(baseGrant(res, owner, t, mods...))
}

func bizKey(res, opID string) []byte { return []byte("biz/" + res + "/" + opID) }

func mut(signed []byte, res, owner, opID string, seg uint64, payload string) Mutation {
	return Mutation{Signed: signed, Resource: res, Owner: owner, Operation: "write", OpID: opID, Segment: seg, Payload: []byte(payload)}
}

// apply stages the business write biz/<res>/<opID> = payload and biz/<res> =
// payload (the resource's current value, which a stale owner would clobber).
func (f *fixture) apply(m Mutation) (Receipt, error) {
	return f.g.Apply(context.Background(), m, func(b *pebble.Batch) error {
		if err := b.Set(bizKey(m.Resource, m.OpID), m.Payload, nil); err != nil {
			return err
		}
		return b.Set([]byte("biz/"+m.Resource), m.Payload, nil)
	})
}

// dump returns every key and value in db, except the quarantine log under
// the Guard's prefix: the full stored state F2 says a refusal must not touch.
func dump(tb testing.TB, db *pebble.DB, prefix []byte) []byte {
	tb.Helper()
	it, err := db.NewIter(nil)
	must.NoError(tb, err)
	defer it.Close()
	quar := append(append([]byte(nil), prefix...), kindQuarantine)
	var out []byte
	for ok := it.First(); ok; ok = it.Next() {
		if bytes.HasPrefix(it.Key(), quar) {
			continue
		}
		v, err := it.ValueAndErr()
		must.NoError(tb, err)
		out = appendU16Bytes(out, it.Key())
		out = append(out, byte(len(v)>>24), byte(len(v)>>16), byte(len(v)>>8), byte(len(v)))
		out = append(out, v...)
	}
	must.NoError(tb, it.Error())
	return out
}

// refused asserts that m is refused with want and that the refusal changed
// no stored state (F2).
func (f *fixture) refused(m Mutation, want error) error {
	f.t.Helper()
	before := dump(f.t, f.db, f.g.prefix)
	_, err := f.apply(m)
	must.ErrorIs(f.t, err, want)
	must.Equal(f.t, before, dump(f.t, f.db, f.g.prefix), "F2: refused mutation changed stored state")
	return err
}

func (f *fixture) accepted(m Mutation) Receipt {
	f.t.Helper()
	rc, err := f.apply(m)
	must.NoError(f.t, err)
	return rc
}

func (f *fixture) highest(res string) Token {
	f.t.Helper()
	infos, err := f.g.Resources(context.Background())
	must.NoError(f.t, err)
	for _, in := range infos {
		if in.Resource == res {
			return in.Highest
		}
	}
	return Token{}
}

func (f *fixture) value(key string) string {
	f.t.Helper()
	v, ok, err := f.g.get([]byte(key))
	must.NoError(f.t, err)
	if !ok {
		return "<none>"
	}
	return string(v)
}
