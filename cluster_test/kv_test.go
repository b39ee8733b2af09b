package clustertest

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/homelock/homelock/fence"
)

const kvDomain = "kvtest"

func openTestKV(t *testing.T, id string, ring *fence.KeyRing, net *KVNet, dir string) *KV {
	t.Helper()
	if dir == "" {
		dir = filepath.Join(t.TempDir(), id)
	}
	kv, err := OpenKV(KVConfig{ID: id, Dir: dir, KeyRing: ring, Domain: kvDomain, Operation: "lock", Net: net})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kv.Close() })
	return kv
}

// signedWrite is what a writer on node from, holding key under tok, sends
// replicas for its seg-th write at timestamp ts.
func signedWrite(t *testing.T, ring *fence.KeyRing, from, key string, tok fence.Token, seg, ts uint64, value string) replWrite {
	t.Helper()
	signed, err := ring.Sign(fence.Grant{
		Resource: key, Owner: from, RequestID: "1.1", Lease: tok.String(), Token: tok, IssuerEpoch: tok.Epoch,
		Domain: kvDomain, TTL: time.Second, Operation: "lock", Scope: fence.ScopeCluster,
	})
	if err != nil {
		t.Fatal(err)
	}
	ver := Version{Token: tok, TS: ts}
	return replWrite{
		from: from, key: key, signed: signed, opID: fmt.Sprintf("%s/%s/%d", from, tok, seg), seg: seg,
		payload: append(ver.encode(), value...), ver: ver,
	}
}

func tok(c uint64) fence.Token { return fence.Token{Epoch: 1, Incarnation: 1, Counter: c} }

func mustGet(t *testing.T, kv *KV, key string) (string, Version) {
	t.Helper()
	v, ver, _, err := kv.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(v), ver
}

// Versions order by token first: a later timestamp under a lower token is
// older. Their encoding sorts the same way.
func TestKVVersionOrder(t *testing.T) {
	vs := []Version{{tok(1), 900}, {tok(2), 5}, {tok(2), 6}, {fence.Token{Epoch: 1, Incarnation: 2, Counter: 1}, 1}, {fence.Token{Epoch: 2, Counter: 1}, 0}}
	for i := range vs {
		for j := range vs {
			want := 0
			switch {
			case i < j:
				want = -1
			case i > j:
				want = 1
			}
			if got := vs[i].Compare(vs[j]); got != want {
				t.Errorf("%s vs %s: %d, want %d", vs[i], vs[j], got, want)
			}
			if got := string(vs[i].encode()) < string(vs[j].encode()); got != (want < 0) {
				t.Errorf("encoding of %s < %s: %v", vs[i], vs[j], got)
			}
		}
		back, err := decodeVersion(vs[i].encode())
		if err != nil || back != vs[i] {
			t.Errorf("decode(encode(%s)) = %s, %v", vs[i], back, err)
		}
	}
}

// The store's token check at a replica: the newer holder's write stays,
// whatever the order of arrival and the timestamps; a stale holder's late
// write is dropped, and the replica's Guard refuses it even when the LWW
// check is bypassed.
func TestKVReplicaTokenCheck(t *testing.T) {
	ring := rcKeyRing(t)
	kv := openTestKV(t, "r", ring, nil, "")
	older := signedWrite(t, ring, "a", "k", tok(1), 1, 1000, "stale holder, late clock")
	newer := signedWrite(t, ring, "b", "k", tok(2), 1, 10, "newer holder")

	kv.applyRemote([]replWrite{newer})
	kv.applyRemote([]replWrite{older})
	if v, ver := mustGet(t, kv, "k"); v != "newer holder" || ver != newer.ver {
		t.Fatalf("replica holds %q at %s", v, ver)
	}
	if applied, stale, refused := kv.ReplicaStats(); applied != 1 || stale != 1 || refused != 0 {
		t.Fatalf("applied %d, stale %d, refused %d", applied, stale, refused)
	}

	// Bypassing the LWW check, the Guard still refuses the lower token and
	// changes nothing (F2).
	k := kv.keyState("k")
	k.mu.Lock()
	err := kv.apply(context.Background(), k, signedWrite(t, ring, "a", "k", tok(1), 2, 2000, "bypass"))
	k.mu.Unlock()
	if !errors.Is(err, fence.ErrStaleOwner) {
		t.Fatalf("guard on a lower token: %v", err)
	}
	if v, _ := mustGet(t, kv, "k"); v != "newer holder" {
		t.Fatalf("a refused write changed the value to %q", v)
	}

	// Segments under one token continue; a forged grant is refused.
	kv.applyRemote([]replWrite{signedWrite(t, ring, "b", "k", tok(2), 2, 11, "second write")})
	other := rcKeyRing(t)
	_ = other.Add("evil", []byte("another-secret-another-secret-xx"))
	kv.applyRemote([]replWrite{signedWrite(t, other, "c", "k", tok(9), 1, 12, "forged")})
	if v, _ := mustGet(t, kv, "k"); v != "second write" {
		t.Fatalf("replica holds %q", v)
	}
	if _, _, refused := kv.ReplicaStats(); refused != 1 {
		t.Fatalf("refused %d, want the forged write", refused)
	}
}

// A replica applies a run of replicated writes in one batch: each judged
// as alone (a stale one dropped, a forged one refused), the rest stored.
func TestKVReplicaBatch(t *testing.T) {
	ring := rcKeyRing(t)
	kv := openTestKV(t, "r", ring, nil, "")
	kv.applyRemote([]replWrite{signedWrite(t, ring, "a", "c", tok(5), 1, 1, "c first")})
	other := rcKeyRing(t)
	_ = other.Add("evil", []byte("another-secret-another-secret-xx"))
	kv.applyRemote([]replWrite{
		signedWrite(t, ring, "a", "a", tok(2), 1, 2, "a one"),
		signedWrite(t, ring, "b", "c", tok(4), 1, 3, "c stale"),
		signedWrite(t, other, "c", "d", tok(9), 1, 4, "forged"),
		signedWrite(t, ring, "b", "b", tok(3), 1, 5, "b one"),
	})
	for key, want := range map[string]string{"a": "a one", "b": "b one", "c": "c first"} {
		if v, _ := mustGet(t, kv, key); v != want {
			t.Errorf("key %s holds %q, want %q", key, v, want)
		}
	}
	if _, _, ok, err := kv.Get("d"); ok || err != nil {
		t.Errorf("the forged write was stored (%v)", err)
	}
	if applied, stale, refused := kv.ReplicaStats(); applied != 3 || stale != 1 || refused != 1 {
		t.Errorf("applied %d, stale %d, refused %d; want 3, 1, 1", applied, stale, refused)
	}
	if got := kv.Version("b"); got.Token != tok(3) {
		t.Errorf("key b at %s", got)
	}
}

// WaitFresh returns once the barrier's version (or a newer one) is applied,
// and ends with its context otherwise; Barrier never goes backwards.
func TestKVFreshnessHooks(t *testing.T) {
	ring := rcKeyRing(t)
	kv := openTestKV(t, "r", ring, nil, "")
	w := signedWrite(t, ring, "a", "k", tok(3), 1, 7, "x")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if err := kv.WaitFreshHook(ctx, "k", w.ver.encode()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitFresh before the write: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- kv.WaitFreshHook(context.Background(), "k", w.ver.encode()) }()
	select {
	case err := <-done:
		t.Fatalf("WaitFresh returned %v before the write arrived", err)
	case <-time.After(20 * time.Millisecond):
	}
	kv.applyRemote([]replWrite{w})
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitFresh did not return after the write arrived")
	}
	if err := kv.WaitFreshHook(context.Background(), "k", nil); err != nil {
		t.Fatal(err)
	}

	b, err := kv.BarrierHook(context.Background(), "k", nil)
	if err != nil || string(b) != string(w.ver.encode()) {
		t.Fatalf("barrier %x, %v; want the key's version", b, err)
	}
	newer := Version{Token: tok(4), TS: 1}.encode()
	if b, _ := kv.BarrierHook(context.Background(), "k", newer); string(b) != string(newer) {
		t.Fatalf("barrier went backwards: %x, inherited %x", b, newer)
	}
	if b, _ := kv.BarrierHook(context.Background(), "none", nil); b != nil {
		t.Fatalf("barrier of an unwritten key with none inherited: %x", b)
	}
}

// KVNet replicates in order per pair, holds everything to and from a paused
// KV until it resumes, and Close stops its goroutines (goleak checks).
func TestKVNetPauseAndOrder(t *testing.T) {
	ring := rcKeyRing(t)
	net := NewKVNet()
	a := openTestKV(t, "a", ring, net, "")
	b := openTestKV(t, "b", ring, net, "")
	net.Pause("b")
	for i := uint64(1); i <= 20; i++ {
		w := signedWrite(t, ring, "a", "k", tok(1), i, i, fmt.Sprint(i))
		k := a.keyState("k")
		k.mu.Lock()
		if err := a.apply(context.Background(), k, w); err != nil {
			t.Fatal(err)
		}
		k.mu.Unlock()
		net.replicate(w)
	}
	time.Sleep(20 * time.Millisecond) // nothing to poll for: b must stay empty
	if _, ver := mustGet(t, b, "k"); ver != (Version{}) {
		t.Fatalf("paused replica applied %s", ver)
	}
	net.Resume("b")
	waitFor(t, 5*time.Second, "b to catch up", net.Settled)
	if v, _ := mustGet(t, b, "k"); v != "20" {
		t.Fatalf("b holds %q", v)
	}
	// Segments 1..20 under one token only apply in order: all were applied.
	if applied, stale, refused := b.ReplicaStats(); applied != 20 || stale != 0 || refused != 0 {
		t.Fatalf("b applied %d, stale %d, refused %d", applied, stale, refused)
	}
}

// A reopened KV remembers its versions and the Guard's segments, so writes
// under the same token continue at the next segment.
func TestKVReopen(t *testing.T) {
	ring := rcKeyRing(t)
	dir := filepath.Join(t.TempDir(), "r")
	kv, err := OpenKV(KVConfig{ID: "r", Dir: dir, KeyRing: ring, Domain: kvDomain, Operation: "lock"})
	if err != nil {
		t.Fatal(err)
	}
	kv.applyRemote([]replWrite{signedWrite(t, ring, "a", "k", tok(5), 1, 40, "one")})
	if err := kv.Close(); err != nil {
		t.Fatal(err)
	}
	kv = openTestKV(t, "r", ring, nil, dir)
	if got := kv.Version("k"); got != (Version{tok(5), 40}) {
		t.Fatalf("version after reopen: %s", got)
	}
	kv.applyRemote([]replWrite{signedWrite(t, ring, "a", "k", tok(5), 2, 41, "two")})
	if v, _ := mustGet(t, kv, "k"); v != "two" {
		t.Fatalf("after reopen the next segment was not applied: %q", v)
	}
	k := kv.keyState("k")
	if k.segTok != tok(5) || k.seg != 2 {
		t.Fatalf("segment state %s/%d", k.segTok, k.seg)
	}
}

// With PruneEvery, each key keeps the receipts of about its last two
// periods: a write two periods old has none (ErrPruned), the latest has
// its receipt, and a stale holder is still refused by the Guard.
func TestKVPrunesReceipts(t *testing.T) {
	ring := rcKeyRing(t)
	const every = 20 * time.Millisecond
	kv, err := OpenKV(KVConfig{ID: "r", Dir: filepath.Join(t.TempDir(), "r"), KeyRing: ring, Domain: kvDomain, Operation: "lock", PruneEvery: every})
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	ctx := context.Background()
	var first, last replWrite
	for c := uint64(1); c <= 40; c++ {
		for _, key := range []string{"a", "b"} {
			w := signedWrite(t, ring, "w", key, tok(c), 1, c, "v")
			kv.applyRemote([]replWrite{w})
			if c == 1 && key == "a" {
				first = w
			}
			last = w
		}
		time.Sleep(every / 4)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		infos, err := kv.Guard().Resources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(infos) == 2 && infos[0].PrunedBelow == tok(40) && infos[1].PrunedBelow == tok(40) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not pruned up to the last fence: %+v", infos)
		}
		time.Sleep(every)
	}
	if _, err := kv.Guard().Receipt(ctx, "a", first.opID); !errors.Is(err, fence.ErrPruned) {
		t.Fatalf("receipt of the first write: %v, want ErrPruned", err)
	}
	if rc, err := kv.Guard().Receipt(ctx, "b", last.opID); err != nil || rc.Token != tok(40) {
		t.Fatalf("receipt of the last write: %+v, %v", rc, err)
	}
	k := kv.keyState("a")
	k.mu.Lock()
	err = kv.apply(ctx, k, signedWrite(t, ring, "w", "a", tok(3), 2, 100, "stale"))
	k.mu.Unlock()
	if !errors.Is(err, fence.ErrStaleOwner) {
		t.Fatalf("a stale holder after pruning: %v", err)
	}
	if n := kv.PruneFailures(); n != 0 {
		t.Fatalf("%d Prune calls failed", n)
	}
}

// Settle prunes at once what the loop would prune a period or two later,
// and returns with the Pebble quiet.
func TestKVSettle(t *testing.T) {
	ring := rcKeyRing(t)
	kv, err := OpenKV(KVConfig{ID: "r", Dir: filepath.Join(t.TempDir(), "r"), KeyRing: ring, Domain: kvDomain, Operation: "lock", PruneEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	ctx := context.Background()
	for c := uint64(1); c <= 5; c++ {
		kv.applyRemote([]replWrite{signedWrite(t, ring, "w", "k", tok(c), 1, c, "v")})
	}
	if err := kv.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	infos, err := kv.Guard().Resources(ctx)
	if err != nil || len(infos) != 1 || infos[0].PrunedBelow != tok(5) {
		t.Fatalf("after Settle: %+v, %v", infos, err)
	}
	if m := kv.db.Metrics(); m.Compact.NumInProgress != 0 || m.Flush.NumInProgress != 0 {
		t.Fatalf("after Settle: %d compactions and %d flushes running", m.Compact.NumInProgress, m.Flush.NumInProgress)
	}
}
