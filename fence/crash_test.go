package fence

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestCrashAtomicity crashes the store at arbitrary moments while fenced
// writes commit, keeping a random share of unsynced data, and checks after
// each restart that the business data, the highest fence and the receipts
// agree (F6: one batch, all or none), and that every acknowledged write
// survived (the batch is synced before Apply returns).
func TestCrashAtomicity(t *testing.T) {
	ring := newRing(t)
	resources := []string{"r0", "r1", "r2"}
	crashes := crashWhileWriting(t, ring, GuardOptions{Prefix: []byte(testPrefix)}, resources)
	for i, c := range crashes {
		db, err := pebble.Open("db", &pebble.Options{FS: c.fs, Logger: quietLogger{}})
		must.NoError(t, err, "reopen after crash %d", i)
		g, err := NewGuard(db, ring, GuardOptions{Prefix: []byte(testPrefix)})
		must.NoError(t, err)
		checkRecovered(t, db, g, resources, c.acked)
		must.NoError(t, db.Close())
	}
	t.Logf("%d crashes checked, %d acknowledged writes at the last", len(crashes), len(crashes[len(crashes)-1].acked))
}

// TestCrashCacheAndOpIndex is TestCrashAtomicity for what the Guard keeps in
// memory: a cache too small for the resources (entries are evicted and
// reread while writes go on) and an operation filter small enough to answer
// "maybe" often. After each crash a new Guard must answer from what survived:
// every operation ID with a receipt is refused under a new fence
// (ErrDuplicateOp), every one without is accepted, and the resource's state
// continues where the surviving receipts end.
func TestCrashCacheAndOpIndex(t *testing.T) {
	ring := newRing(t)
	resources := []string{"r0", "r1", "r2", "r3", "r4", "r5"}
	opts := GuardOptions{Prefix: []byte(testPrefix), CacheResources: 2, OpIndexBytes: 256}
	crashes := crashWhileWriting(t, ring, opts, resources)
	ctx := context.Background()
	for i, c := range crashes {
		db, err := pebble.Open("db", &pebble.Options{FS: c.fs, Logger: quietLogger{}})
		must.NoError(t, err, "reopen after crash %d", i)
		g, err := NewGuard(db, ring, opts)
		must.NoError(t, err)
		checkRecovered(t, db, g, resources, c.acked)
		acked := map[string]bool{}
		for _, rc := range c.acked {
			acked[rc.OpID] = true
		}
		// A new owner of every resource resends every operation attempted
		// before the crash, and some that never were.
		next := map[string]uint64{}
		grants := map[string][]byte{}
		for _, r := range resources {
			grants[r] = sign(t, ring, baseGrant(r, "N", tok(2, 1, 1)))
		}
		for n := range c.attempted + 10 {
			opID := fmt.Sprintf("op%d", n)
			r := resources[rand.New(rand.NewPCG(uint64(n), 0)).IntN(len(resources))]
			if n < len(c.sentTo) {
				r = c.sentTo[n]
			}
			rc, err := g.Receipt(ctx, r, opID)
			had := err == nil
			if !had {
				must.ErrorIs(t, err, ErrNoReceipt)
			}
			if acked[opID] {
				must.True(t, had && rc.OpID == opID, "crash %d: acknowledged %s lost", i, opID)
			}
			_, err = g.Apply(ctx, Mutation{Signed: grants[r], Resource: r, Owner: "N", Operation: "write",
				OpID: opID, Segment: next[r] + 1, Payload: []byte("again")}, nil)
			if had {
				must.ErrorIs(t, err, ErrDuplicateOp, "crash %d: %s has a receipt", i, opID)
				continue
			}
			must.NoError(t, err, "crash %d: %s has no receipt", i, opID)
			next[r]++
		}
		must.NoError(t, db.Close())
	}
}

type crash struct {
	fs    *vfs.MemFS
	acked []Receipt
	// attempted is how many operations were sent: op<n> to sentTo[n].
	attempted int
	sentTo    []string
}

// crashWhileWriting runs a writer of 1500 fenced writes over resources and
// takes crash clones of the store while it runs, each with the writes
// acknowledged before it.
func crashWhileWriting(t *testing.T, ring *KeyRing, opts GuardOptions, resources []string) []crash {
	t.Helper()
	fs := vfs.NewCrashableMem()
	db, err := pebble.Open("db", &pebble.Options{FS: fs, Logger: quietLogger{}, MemTableSize: 1 << 20})
	must.NoError(t, err)
	g, err := NewGuard(db, ring, opts)
	must.NoError(t, err)

	var mu sync.Mutex
	var acked []Receipt
	var attempted int
	var sentTo []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		rng := rand.New(rand.NewPCG(1, 2))
		held := map[string]*holding{}
		var counter uint64
		for i := range 1500 {
			r := resources[rng.IntN(len(resources))]
			h := held[r]
			if h == nil || rng.IntN(8) == 0 {
				counter++
				gr := baseGrant(r, fmt.Sprintf("o%d", counter%3), tok(1, 1, counter))
				s, _ := ring.Sign(gr)
				h = &holding{signed: s, grant: gr, next: 1}
				held[r] = h
			}
			payload := bytes.Repeat([]byte{byte(i)}, 512+rng.IntN(512))
			m := Mutation{Signed: h.signed, Resource: r, Owner: h.grant.Owner, Operation: "write",
				OpID: fmt.Sprintf("op%d", i), Segment: h.next, Payload: payload}
			mu.Lock()
			attempted = i + 1
			sentTo = append(sentTo, r)
			mu.Unlock()
			rc, err := g.Apply(context.Background(), m, func(b *pebble.Batch) error {
				if err := b.Set([]byte("biz/"+r+"/"+m.OpID), payload, nil); err != nil {
					return err
				}
				return b.Set([]byte("biz/"+r), payload, nil)
			})
			if err != nil {
				t.Errorf("apply %s: %v", m.OpID, err)
				return
			}
			h.next++
			mu.Lock()
			acked = append(acked, rc)
			mu.Unlock()
		}
	}()

	var crashes []crash
	rng := rand.New(rand.NewPCG(3, 4))
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		mu.Lock()
		before := append([]Receipt(nil), acked...)
		mu.Unlock()
		time.Sleep(200 * time.Microsecond) // let the writer run between crashes
		if len(crashes) < 30 && len(before) > len(crashes)*45 {
			c := crash{fs: fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rng}), acked: before}
			mu.Lock()
			c.attempted, c.sentTo = attempted, append([]string(nil), sentTo...)
			mu.Unlock()
			crashes = append(crashes, c)
		}
	}
	must.NoError(t, db.Close())
	must.True(t, len(crashes) >= 10, "only %d crashes taken", len(crashes))
	return crashes
}

func checkRecovered(t *testing.T, db *pebble.DB, g *Guard, resources []string, acked []Receipt) {
	t.Helper()
	ctx := context.Background()
	for _, rc := range acked {
		got, err := g.Receipt(ctx, rc.Resource, rc.OpID)
		must.NoError(t, err, "acknowledged %s lost", rc.OpID)
		must.Equal(t, rc, got)
	}
	infos, err := g.Resources(ctx)
	must.NoError(t, err)
	byRes := map[string]ResourceInfo{}
	for _, in := range infos {
		byRes[in.Resource] = in
	}
	for _, r := range resources {
		// Every receipt has its business row with the digested payload, and
		// the resource's state is exactly the last receipt's.
		lower := g.resourceKey(kindReceipt, r, 0)
		it, err := db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: keyUpperBound(lower)})
		must.NoError(t, err)
		var n uint64
		var last Receipt
		var maxTok Token
		var maxSeg uint64
		for ok := it.First(); ok; ok = it.Next() {
			rc, err := decodeReceipt(r, it.Value())
			must.NoError(t, err)
			v, ok, err := g.get([]byte("biz/" + r + "/" + rc.OpID))
			must.NoError(t, err)
			must.True(t, ok && sha256.Sum256(v) == rc.PayloadDigest, "receipt %s without its business row", rc.OpID)
			n++
			if rc.Seq > last.Seq {
				last = rc
			}
			if c := rc.Token.Compare(maxTok); c > 0 || c == 0 && rc.Segment > maxSeg {
				maxTok, maxSeg = rc.Token, rc.Segment
			}
		}
		must.NoError(t, it.Close())
		// And no business row lacks its receipt.
		bl := []byte("biz/" + r + "/")
		bit, err := db.NewIter(&pebble.IterOptions{LowerBound: bl, UpperBound: keyUpperBound(bl)})
		must.NoError(t, err)
		var rows uint64
		for ok := bit.First(); ok; ok = bit.Next() {
			rows++
		}
		must.NoError(t, bit.Close())
		must.Equal(t, n, rows, "resource %s: %d receipts, %d business rows", r, n, rows)
		in := byRes[r]
		must.Equal(t, n, in.Accepted)
		must.Equal(t, maxTok, in.Highest)
		must.Equal(t, maxSeg, in.LastSegment)
		must.Equal(t, n, last.Seq)
		if n > 0 {
			v, _, _ := g.get([]byte("biz/" + r))
			must.True(t, sha256.Sum256(v) == last.PayloadDigest, "resource %s value is not its last receipt's", r)
		}
	}
}
