package localstore

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/homelock/homelock/epoch"
	"github.com/homelock/homelock/msg"
	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives its test: every test
// closes what it opens, so a leak means Close left Pebble work running.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testDir = "/data/node"

func testOptions(fs vfs.FS) Options {
	return Options{FS: fs, NodeID: "n1", ClusterID: "c1"}
}

// openT opens a store and closes it when the test ends (unless the test
// already did).
func openT(t testing.TB, fs vfs.FS, opts Options) *Store {
	t.Helper()
	if opts.FS == nil {
		opts.FS = fs
	}
	s, err := Open(testDir, opts)
	noErr(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func member(id string, store uint64) msg.Member {
	return msg.Member{ID: msg.NodeID(id), Store: store, Addr: id + ":7000", Version: 1}
}

func testEpoch(n uint64) msg.Epoch {
	return msg.Epoch{
		Number:  n,
		Members: []msg.Member{member("n1", 11), member("n2", 22), member("n3", 33)},
		Caps:    msg.Caps{Ring: msg.RingV1},
	}
}

func testLearned(n uint64) *epoch.Learned {
	prev := testEpoch(n - 1)
	return &epoch.Learned{
		Epoch: testEpoch(n),
		Cert: msg.Certificate{
			Ballot:    msg.Ballot{Counter: n, Node: "n2"},
			Acceptors: prev.Members[:2],
			Prev:      prev,
		},
	}
}

func promise(instance, counter uint64) epoch.AcceptorRecord {
	return epoch.AcceptorRecord{Instance: instance, Promised: msg.Ballot{Counter: counter, Node: "n2"}}
}

func acceptance(instance, counter uint64) epoch.AcceptorRecord {
	v := testEpoch(instance)
	b := msg.Ballot{Counter: counter, Node: "n3"}
	return epoch.AcceptorRecord{Instance: instance, Promised: b, Accepted: b, Value: &v}
}

// The helpers below stand in for testify, whose yaml dependency has no go.sum
// entry in this module.

func noErr(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

func isErr(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want %v", err, target)
	}
}

func errContains(t testing.TB, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not contain %q", err, p)
		}
	}
}

func eq(t testing.TB, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}
