package localstore

import (
	"io"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/homelock/homelock/epoch"
)

// history is a store with some protocol state written, then closed: the
// subject of the crash-vs-corruption table.
type history struct {
	fs  vfs.FS
	dir string
	// final is what the store acknowledged; mid is the counter file's bytes
	// halfway through, for the rolled-back case.
	final durable
	mid   []byte
}

const historyEpochs = 30

// makeHistory writes one incarnation bump and historyEpochs commits, each
// with a learned epoch, a promise for the next instance and a gate marker,
// so that the WAL holds many records and losing its second half loses
// acknowledged state. With flush, the memtable is flushed to an sstable
// before the store closes.
func makeHistory(t *testing.T, fs vfs.FS, dir string, flush bool) *history {
	t.Helper()
	h := &history{fs: fs, dir: dir}
	s, err := Open(dir, testOptions(fs))
	noErr(t, err)
	model := durable{acceptor: map[uint64]epoch.AcceptorRecord{}, gates: map[uint64]bool{}}
	model.inc, err = s.BumpIncarnation()
	noErr(t, err)
	for n := uint64(1); n <= historyEpochs; n++ {
		w := Writes{Learned: testLearned(n), Acceptor: []epoch.AcceptorRecord{promise(n+1, n)}, GatePassed: []uint64{n}}
		noErr(t, s.Commit(w))
		model.apply(w)
		if n == historyEpochs/2 {
			h.mid = readFile(t, fs, fs.PathJoin(dir, counterFileName))
		}
	}
	eq(t, readDurable(t, s, historyEpochs).String(), model.String())
	if flush {
		noErr(t, s.DB().Flush())
	}
	noErr(t, s.Close())
	h.final = model
	return h
}

// files returns the paths in h.dir whose names match.
func (h *history) files(t *testing.T, match func(name string) bool) []string {
	t.Helper()
	names, err := h.fs.List(h.dir)
	noErr(t, err)
	var out []string
	for _, n := range names {
		if match(n) {
			out = append(out, h.fs.PathJoin(h.dir, n))
		}
	}
	slices.Sort(out)
	if len(out) == 0 {
		t.Fatalf("no matching file in %s: %v", h.dir, names)
	}
	return out
}

func isWAL(n string) bool      { return strings.HasSuffix(n, ".log") }
func isSST(n string) bool      { return strings.HasSuffix(n, ".sst") }
func isManifest(n string) bool { return strings.HasPrefix(n, "MANIFEST-") }

// lastWAL is the WAL the next Open replays with a tolerant tail.
func lastWAL(t *testing.T, h *history) string {
	w := h.files(t, isWAL)
	return w[len(w)-1]
}

func readFile(t *testing.T, fs vfs.FS, path string) []byte {
	t.Helper()
	f, err := fs.Open(path)
	noErr(t, err)
	defer f.Close()
	b, err := io.ReadAll(f)
	noErr(t, err)
	return b
}

func writeFile(t *testing.T, fs vfs.FS, path string, b []byte) {
	t.Helper()
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	noErr(t, err)
	_, err = f.Write(b)
	noErr(t, err)
	noErr(t, f.Sync())
	noErr(t, f.Close())
}

// garbage returns n bytes that are no valid record.
func garbage(n int) []byte {
	rng := rand.New(rand.NewPCG(3, 4))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func truncateHalf(path func(*testing.T, *history) string) func(*testing.T, *history) {
	return func(t *testing.T, h *history) {
		p := path(t, h)
		b := readFile(t, h.fs, p)
		writeFile(t, h.fs, p, b[:len(b)/2])
	}
}

func garbageInMiddle(path func(*testing.T, *history) string) func(*testing.T, *history) {
	return func(t *testing.T, h *history) {
		p := path(t, h)
		b := readFile(t, h.fs, p)
		copy(b[len(b)/2:], garbage(32))
		writeFile(t, h.fs, p, b)
	}
}

func first(match func(string) bool) func(*testing.T, *history) string {
	return func(t *testing.T, h *history) string { return h.files(t, match)[0] }
}

// crashAt is a crash at the k-th sync of a write, before or after that sync
// reached the disk.
type crashAt struct {
	k     int
	after bool
}

// TestCrashVersusCorruption is the line S4 draws. A crash loses only what
// was never synced, so nothing acknowledged is missing and the store opens
// with everything it acknowledged (and perhaps the write in flight).
// Damage to synced data (a WAL cut short or overwritten, a bad sstable or
// MANIFEST, a counter file missing, stale or foreign) would make the node
// an acceptor that forgot what it promised: Open refuses with ErrCorrupt,
// says what it found and what to do, and refuses again the next time.
//
// Rows run on Pebble's crashable MemFS and, where they need no crash, on
// real files as well.
func TestCrashVersusCorruption(t *testing.T) {
	tests := []struct {
		name  string
		flush bool
		// crash, if set, is a crash at the crash.k-th sync of one more
		// Commit (before or after it reached the disk); MemFS only.
		crash  *crashAt
		damage func(*testing.T, *history)
		want   []string // nil: Open succeeds with the acknowledged state
	}{{
		name:   "clean reopen",
		damage: func(*testing.T, *history) {},
	}, {
		name:  "crash before the WAL sync (torn WAL tail)",
		crash: &crashAt{1, false},
	}, {
		name:  "crash after the WAL sync, before the counter file's",
		crash: &crashAt{1, true},
	}, {
		name:  "crash during the counter file's sync",
		crash: &crashAt{2, false},
	}, {
		name:  "crash after both syncs, before Commit returned",
		crash: &crashAt{2, true},
	}, {
		name: "half-written record after the last synced one",
		damage: func(t *testing.T, h *history) {
			p := lastWAL(t, h)
			writeFile(t, h.fs, p, append(readFile(t, h.fs, p), garbage(20)...))
		},
	}, {
		name: "counter slot torn by a crash while writing it",
		damage: func(t *testing.T, h *history) {
			p := h.fs.PathJoin(h.dir, counterFileName)
			b := readFile(t, h.fs, p)
			last := h.final.inc + historyEpochs + 1 // create, bump, commits
			copy(b[(last%2)*counterSlotStride+10:], garbage(8))
			writeFile(t, h.fs, p, b)
		},
	}, {
		name:   "WAL truncated to half",
		damage: truncateHalf(lastWAL),
		want:   []string{"Pebble lost synced writes"},
	}, {
		name:   "32 garbage bytes in the middle of the WAL",
		damage: garbageInMiddle(lastWAL),
		want:   []string{"lost synced writes"},
	}, {
		name:   "WAL removed",
		damage: func(t *testing.T, h *history) { noErr(t, h.fs.Remove(lastWAL(t, h))) },
		want:   []string{"Pebble lost synced writes"},
	}, {
		name:   "garbage in an sstable",
		flush:  true,
		damage: garbageInMiddle(first(isSST)),
		want:   []string{"checksum mismatch"},
	}, {
		name:   "MANIFEST truncated to half",
		damage: truncateHalf(first(isManifest)),
		want:   []string{"MANIFEST"},
	}, {
		name:   "counter file missing",
		damage: func(t *testing.T, h *history) { noErr(t, h.fs.Remove(h.fs.PathJoin(h.dir, counterFileName))) },
		want:   []string{"counter file", "is missing but the database holds write 32"},
	}, {
		name: "counter file rolled back",
		damage: func(t *testing.T, h *history) {
			writeFile(t, h.fs, h.fs.PathJoin(h.dir, counterFileName), h.mid)
		},
		want: []string{"acknowledges write 17 but the database holds write 32", "rolled back"},
	}, {
		name: "counter file overwritten",
		damage: func(t *testing.T, h *history) {
			writeFile(t, h.fs, h.fs.PathJoin(h.dir, counterFileName), garbage(counterFileLen))
		},
		want: []string{"has no readable slot", "bad magic"},
	}, {
		name: "counter file of another store",
		damage: func(t *testing.T, h *history) {
			other := h.dir + "-other"
			s, err := Open(other, testOptions(h.fs))
			noErr(t, err)
			noErr(t, s.Close())
			writeFile(t, h.fs, h.fs.PathJoin(h.dir, counterFileName), readFile(t, h.fs, h.fs.PathJoin(other, counterFileName)))
		},
		want: []string{"counter file does not match the database", "belongs to store"},
	}}
	for _, tt := range tests {
		for _, kind := range []string{"memfs", "os"} {
			if kind == "os" && tt.crash != nil {
				continue
			}
			t.Run(tt.name+"/"+kind, func(t *testing.T) {
				var fs vfs.FS = vfs.NewCrashableMem()
				dir := testDir
				if kind == "os" {
					fs, dir = vfs.Default, filepath.Join(t.TempDir(), "node")
				}
				cfs := newCrashFS(vfs.NewCrashableMem(), rand.New(rand.NewPCG(5, 6)))
				if tt.crash != nil {
					fs = cfs
				}
				h := makeHistory(t, fs, dir, tt.flush)
				allowed := []durable{h.final}
				if tt.crash != nil {
					s, err := Open(dir, testOptions(fs))
					noErr(t, err)
					w := Writes{Learned: testLearned(historyEpochs + 1), Acceptor: []epoch.AcceptorRecord{acceptance(historyEpochs+2, 7)}}
					cfs.arm(tt.crash.k, tt.crash.after)
					noErr(t, s.Commit(w))
					img := cfs.disarm()
					noErr(t, s.Close())
					if img == nil {
						t.Fatalf("the crash at sync %d did not fire", tt.crash.k)
					}
					next := h.final.clone()
					next.apply(w)
					allowed = append(allowed, next)
					fs = img
				} else {
					tt.damage(t, h)
				}
				for attempt := range 2 {
					s, err := Open(dir, testOptions(fs))
					if tt.want == nil {
						noErr(t, err)
						got := readDurable(t, s, historyEpochs+2)
						noErr(t, s.Close())
						if !slices.ContainsFunc(allowed, got.equal) {
							t.Fatalf("attempt %d: store holds %s\nwant one of %v", attempt, got, allowed)
						}
						continue
					}
					if err == nil {
						got := readDurable(t, s, historyEpochs+2)
						s.Close()
						t.Fatalf("attempt %d: damaged store opened, holding %s (acknowledged: %s)", attempt, got.summary(), h.final.summary())
					}
					isErr(t, err, ErrCorrupt)
					errContains(t, err, append([]string{dir, "restore the directory", "Join", "new member"}, tt.want...)...)
					if attempt == 0 {
						t.Logf("%v", err)
					}
				}
			})
		}
	}
}

// A store written before the write counter existed (its records, no counter
// key, no counter file) opens, keeps its state and starts counting; from
// then on it is protected like any other (S4).
func TestStoreWithoutCounterStartsOne(t *testing.T) {
	fs := vfs.NewMem()
	id := Identity{NodeID: "n1", StoreID: 77, ClusterID: "c1"}
	rawPebble(func(db *pebble.DB) error {
		b := db.NewBatch()
		defer b.Close()
		noErr(t, b.Set(identityKey, encodeIdentity(id), nil))
		noErr(t, b.Set(incarnationKey, encodeIncarnation(4), nil))
		noErr(t, b.Set(learnedKey, encodeLearned(*testLearned(6)), nil))
		return b.Commit(pebble.Sync)
	})(t, fs)

	s, err := Open(testDir, testOptions(fs))
	noErr(t, err)
	eq(t, s.Identity(), id)
	eq(t, loadT(t, s).Learned.Epoch.Number, uint64(6))
	inc, err := s.BumpIncarnation()
	noErr(t, err)
	eq(t, inc, uint64(5))
	noErr(t, s.Close())

	noErr(t, fs.Remove(fs.PathJoin(testDir, counterFileName)))
	_, err = Open(testDir, testOptions(fs))
	isErr(t, err, ErrCorrupt)
	errContains(t, err, "is missing but the database holds write 2")
}
