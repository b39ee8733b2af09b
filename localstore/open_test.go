package localstore

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/homelock/homelock/epoch"
	"github.com/homelock/homelock/msg"
)

func TestOpenCreatesIdentity(t *testing.T) {
	fs := vfs.NewMem()
	s := openT(t, fs, testOptions(fs))
	id := s.Identity()
	if id.NodeID != "n1" || id.ClusterID != "c1" || id.StoreID == 0 {
		t.Fatalf("identity %+v", id)
	}
	noErr(t, s.Close())

	// Reopening keeps the identity; a second directory gets another store ID.
	s = openT(t, fs, testOptions(fs))
	eq(t, s.Identity(), id)
	other, err := Open("/data/other", testOptions(fs))
	noErr(t, err)
	defer other.Close()
	if other.Identity().StoreID == id.StoreID {
		t.Fatalf("two stores share store ID %d", id.StoreID)
	}
}

func TestOpenRejectsInvalidOptions(t *testing.T) {
	for _, opts := range []Options{{ClusterID: "c1"}, {NodeID: "n1"}} {
		opts.FS = vfs.NewMem()
		_, err := Open(testDir, opts)
		isErr(t, err, ErrInvalidOptions)
	}
}

// S2: a directory is never silently reset. Each case prepares a directory,
// checks that Open refuses it with an error naming the directory and the
// values involved, then checks that the refusal changed nothing: the same
// Open fails the same way again, and the right options still open it.
func TestOpenRefusals(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, fs vfs.FS)
		opts    Options
		want    error
		parts   []string
	}{{
		name:    "wrong node",
		prepare: createStore,
		opts:    Options{NodeID: "n2", ClusterID: "c1"},
		want:    ErrWrongNode,
		parts:   []string{testDir, `node "n1"`, `as node "n2"`},
	}, {
		name:    "wrong cluster",
		prepare: createStore,
		opts:    Options{NodeID: "n1", ClusterID: "c2"},
		want:    ErrWrongCluster,
		parts:   []string{testDir, `cluster "c1"`, `for cluster "c2"`},
	}, {
		name:    "corrupt identity",
		prepare: rawSet(identityKey, []byte{1, 2, 'n'}),
		want:    ErrCorrupt,
		parts:   []string{testDir, "identity: truncated"},
	}, {
		name:    "corrupt acceptor record",
		prepare: rawSet(acceptorKey(4), []byte{1, 4, 0, 0, 0, 0, 7}),
		want:    ErrCorrupt,
		parts:   []string{testDir, "bad bool"},
	}, {
		name:    "acceptor record under another instance",
		prepare: rawSet(acceptorKey(4), mustEncodeAcceptor(promise(5, 1))),
		want:    ErrCorrupt,
		parts:   []string{"instance 5 stored under instance 4"},
	}, {
		name:    "newer record version",
		prepare: rawSet(learnedKey, []byte{2}),
		want:    ErrCorrupt,
		parts:   []string{"unknown record version 2"},
	}, {
		name:    "unknown key kind",
		prepare: rawSet([]byte{0x42, 1}, []byte{1}),
		want:    ErrCorrupt,
		parts:   []string{"key 4201", "unknown key"},
	}, {
		name:    "pebble database without identity",
		prepare: rawPebble(nil),
		want:    ErrMissingIdentity,
		parts:   []string{testDir, "no records at all", "interrupted"},
	}, {
		name: "records without identity",
		prepare: rawPebble(func(db *pebble.DB) error {
			return db.Set(acceptorKey(3), mustEncodeAcceptor(promise(3, 1)), pebble.Sync)
		}),
		want:  ErrMissingIdentity,
		parts: []string{testDir, "holds 1 records but no identity"},
	}, {
		name: "foreign files",
		prepare: func(t *testing.T, fs vfs.FS) {
			noErr(t, fs.MkdirAll(testDir, 0o755))
			f, err := fs.Create(fs.PathJoin(testDir, "notes.txt"), vfs.WriteCategoryUnspecified)
			noErr(t, err)
			noErr(t, f.Close())
		},
		want:  ErrMissingIdentity,
		parts: []string{testDir, "no Pebble database"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := vfs.NewMem()
			tt.prepare(t, fs)
			opts := tt.opts
			if opts.NodeID == "" {
				opts = testOptions(nil)
			}
			opts.FS = fs
			for range 2 {
				s, err := Open(testDir, opts)
				if err == nil {
					s.Close()
				}
				isErr(t, err, tt.want)
				errContains(t, err, tt.parts...)
			}
			if tt.want == ErrWrongNode || tt.want == ErrWrongCluster {
				s := openT(t, fs, testOptions(fs))
				eq(t, s.Identity().NodeID, msg.NodeID("n1"))
			}
		})
	}
}

func createStore(t *testing.T, fs vfs.FS) {
	s, err := Open(testDir, testOptions(fs))
	noErr(t, err)
	_, err = s.BumpIncarnation()
	noErr(t, err)
	noErr(t, s.Close())
}

// rawSet creates a store, then writes k=v behind its back.
func rawSet(k, v []byte) func(*testing.T, vfs.FS) {
	return func(t *testing.T, fs vfs.FS) {
		s, err := Open(testDir, testOptions(fs))
		noErr(t, err)
		noErr(t, s.DB().Set(k, v, pebble.Sync))
		noErr(t, s.Close())
	}
}

// rawPebble creates a bare Pebble database, as an interrupted first Open
// would leave it, and lets fill write into it.
func rawPebble(fill func(*pebble.DB) error) func(*testing.T, vfs.FS) {
	return func(t *testing.T, fs vfs.FS) {
		db, err := pebble.Open(testDir, &pebble.Options{FS: fs, Logger: pebbleLogger{l: slog.New(slog.DiscardHandler)}})
		noErr(t, err)
		if fill != nil {
			noErr(t, fill(db))
		}
		noErr(t, db.Close())
	}
}

// Keys under the Guard's prefix belong to fence.Guard: Open neither reads
// nor refuses them, and Commit never touches them.
func TestGuardKeysAreLeftAlone(t *testing.T) {
	fs := vfs.NewMem()
	s := openT(t, fs, testOptions(fs))
	gk := append(s.GuardPrefix(), "resource/1"...)
	noErr(t, s.DB().Set(gk, []byte("anything, any format"), pebble.Sync))
	noErr(t, s.Commit(Writes{Learned: testLearned(9)}))
	noErr(t, s.Close())

	s = openT(t, fs, testOptions(fs))
	v, closer, err := s.DB().Get(gk)
	noErr(t, err)
	eq(t, string(v), "anything, any format")
	noErr(t, closer.Close())
	if p := s.GuardPrefix(); p[0] < ownedEnd {
		t.Fatalf("guard prefix %x overlaps localstore's keys", p)
	}
}

func TestClosed(t *testing.T) {
	fs := vfs.NewMem()
	s := openT(t, fs, testOptions(fs))
	noErr(t, s.Close())
	isErr(t, s.Close(), ErrClosed)
	isErr(t, s.Commit(Writes{Acceptor: []epoch.AcceptorRecord{promise(1, 1)}}), ErrClosed)
	_, err := s.BumpIncarnation()
	isErr(t, err, ErrClosed)
	_, err = s.LoadEpochState()
	isErr(t, err, ErrClosed)
	_, err = s.GatePassed(1)
	isErr(t, err, ErrClosed)
}

func ExampleOpen() {
	s, err := Open("/node1", Options{FS: vfs.NewMem(), NodeID: "n1", ClusterID: "prod"})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	inc, _ := s.BumpIncarnation() // once per start, before anything is sent
	fmt.Println("incarnation", inc)
	// Output: incarnation 1
}

// The gossip addresses survive a reopen (Open's scan accepts the record) and
// a later save replaces them whole.
func TestGossipAddrsReopen(t *testing.T) {
	fs := vfs.NewMem()
	s := openT(t, fs, testOptions(fs))
	g, err := s.GossipAddrs()
	noErr(t, err)
	eq(t, len(g), 0)
	noErr(t, s.SaveGossipAddrs(map[msg.NodeID]string{"n2": "127.0.0.1:2", "n3": "127.0.0.1:3"}))
	noErr(t, s.SaveGossipAddrs(map[msg.NodeID]string{"n2": "127.0.0.1:22"}))
	noErr(t, s.Close())
	s = openT(t, fs, testOptions(fs))
	g, err = s.GossipAddrs()
	noErr(t, err)
	eq(t, g, map[msg.NodeID]string{"n2": "127.0.0.1:22"})
}
