package fence_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/homelock/homelock/fence"
)

// A worker's write times out and its lease runs out: MUTATION_UNKNOWN. The
// worker that takes over with a new fence fences first, then reconciles the
// operation, and redoes it only if it provably did not happen.
func ExampleGuard_Reconcile() {
	ctx := context.Background()
	db, _ := pebble.Open("db", &pebble.Options{FS: vfs.NewMem()})
	defer db.Close()
	ring := fence.NewKeyRing()
	_ = ring.Add("k1", bytes.Repeat([]byte{1}, 32))
	guard, _ := fence.NewGuard(db, ring, fence.GuardOptions{Prefix: []byte("\x00fence/"), Domain: "cluster-a"})
	const resource = "invoice-batch/2026-07-19"
	grant := func(owner string, counter uint64) []byte {
		s, _ := ring.Sign(fence.Grant{
			Resource: resource, Owner: owner, RequestID: fmt.Sprint("req-", counter), Lease: fmt.Sprint("lease-", counter),
			Token: fence.Token{Epoch: 1, Incarnation: 1, Counter: counter}, IssuerEpoch: 1, Domain: "cluster-a",
			TTL: 10 * time.Second, Operation: "settle", Scope: fence.ScopeCluster,
		})
		return s
	}
	write := func(signed []byte, owner, opID string, seg uint64) error {
		_, err := guard.Apply(ctx, fence.Mutation{
			Signed: signed, Resource: resource, Owner: owner, Operation: "settle", OpID: opID, Segment: seg, Payload: []byte(opID),
		}, func(b *pebble.Batch) error { return b.Set([]byte("invoices/"+opID), []byte("settled"), nil) })
		return err
	}

	// Worker A settles line 41; its acknowledgement for line 42 is lost.
	// (Here line 42 did commit; line 43 never reached the resource.)
	a := grant("worker-a", 1)
	_ = write(a, "worker-a", "settle-41", 1)
	_ = write(a, "worker-a", "settle-42", 2)

	// Worker B takes over with a higher fence. Step 1: fence. A write under
	// the new token (here one without business data) makes the resource
	// refuse every copy of A's writes still in flight.
	b := grant("worker-b", 2)
	_ = write(b, "worker-b", "takeover-worker-b", 1)
	next := uint64(2)

	// Step 2: reconcile each operation A may have left unknown, by the
	// fence A sent it under.
	for _, op := range []string{"settle-42", "settle-43"} {
		r, err := guard.Reconcile(ctx, resource, op, fence.Token{Epoch: 1, Incarnation: 1, Counter: 1})
		if err != nil {
			panic(err)
		}
		switch r.Outcome {
		case fence.OutcomeAccepted: // it happened: reuse its result
			fmt.Printf("%s: accepted under %s segment %d\n", op, r.Receipt.Token, r.Receipt.Segment)
		case fence.OutcomeRefused: // it did not, and never will: redo it
			fmt.Printf("%s: refused; redone: %v\n", op, write(b, "worker-b", op, next))
			next++
		case fence.OutcomeNeverSeen: // not final: B did not fence first
			fmt.Printf("%s: unknown; fence, then ask again\n", op)
		}
	}
	// A late copy of A's write is refused: the operation happens once.
	fmt.Println(write(a, "worker-a", "settle-43", 3) != nil)

	// Once B has reconciled, nothing asks about A's operations again: the
	// store prunes their receipts, and an answer about one of them now says
	// that it cannot tell, not that it did not happen.
	n, _ := guard.Prune(ctx, resource, fence.Token{Epoch: 1, Incarnation: 1, Counter: 2})
	_, err := guard.Reconcile(ctx, resource, "settle-42", fence.Token{Epoch: 1, Incarnation: 1, Counter: 1})
	fmt.Println(n, errors.Is(err, fence.ErrPruned))
	// Output:
	// settle-42: accepted under e1.i1.c1 segment 2
	// settle-43: refused; redone: <nil>
	// true
	// 2 true
}

// A replica applies the writes its replication log delivered, each under
// its writer's grant, in one synced commit: each is judged as Apply would
// judge it alone, so a stale writer's late write is refused and the rest
// are stored.
func ExampleGuard_ApplyBatch() {
	ctx := context.Background()
	db, _ := pebble.Open("replica", &pebble.Options{FS: vfs.NewMem()})
	defer db.Close()
	ring := fence.NewKeyRing()
	_ = ring.Add("k1", bytes.Repeat([]byte{1}, 32))
	guard, _ := fence.NewGuard(db, ring, fence.GuardOptions{Prefix: []byte("\x00fence/"), Domain: "cluster-a"})
	item := func(resource, owner string, counter uint64, value string) fence.BatchItem {
		signed, _ := ring.Sign(fence.Grant{
			Resource: resource, Owner: owner, RequestID: fmt.Sprint("req-", counter), Lease: fmt.Sprint("lease-", counter),
			Token: fence.Token{Epoch: 1, Incarnation: 1, Counter: counter}, IssuerEpoch: 1, Domain: "cluster-a",
			TTL: 10 * time.Second, Operation: "put", Scope: fence.ScopeCluster,
		})
		return fence.BatchItem{
			Mutation: fence.Mutation{Signed: signed, Resource: resource, Owner: owner, Operation: "put", OpID: fmt.Sprint(owner, "/", counter), Segment: 1, Payload: []byte(value)},
			Stage:    func(b *pebble.Batch) error { return b.Set([]byte("v/"+resource), []byte(value), nil) },
		}
	}
	// The replica already holds a write to "b" under counter 5.
	_, _ = guard.ApplyBatch(ctx, []fence.BatchItem{item("b", "n2", 5, "b5")})

	_, errs := guard.ApplyBatch(ctx, []fence.BatchItem{
		item("a", "n1", 3, "a3"),
		item("b", "n3", 4, "b4, late"), // a stale writer: refused
		item("c", "n1", 7, "c7"),
	})
	for i, err := range errs {
		fmt.Println(i, err == nil, errors.Is(err, fence.ErrStaleOwner))
	}
	v, closer, _ := db.Get([]byte("v/b"))
	fmt.Println(string(v))
	_ = closer.Close()
	// Output:
	// 0 true false
	// 1 false true
	// 2 true false
	// b5
}
