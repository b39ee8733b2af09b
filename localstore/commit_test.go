package localstore

import (
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/homelock/homelock/epoch"
	"github.com/homelock/homelock/msg"
)

// reopen closes s and opens the same directory again, so that every check
// after it reads what is on disk rather than what is cached.
func reopen(t *testing.T, s *Store, fs vfs.FS) *Store {
	t.Helper()
	noErr(t, s.Close())
	return openT(t, fs, testOptions(fs))
}

func loadT(t *testing.T, s *Store) epoch.State {
	t.Helper()
	st, err := s.LoadEpochState()
	noErr(t, err)
	return st
}

func TestCommitReplacesAcceptorRecords(t *testing.T) {
	fs := vfs.NewMem()
	s := openT(t, fs, testOptions(fs))
	eq(t, loadT(t, s), epoch.State{})
	noErr(t, s.Commit(Writes{Acceptor: []epoch.AcceptorRecord{promise(3, 1), promise(2, 1)}}))
	// A later record for an instance replaces it, also within one Commit.
	noErr(t, s.Commit(Writes{Acceptor: []epoch.AcceptorRecord{promise(3, 2), acceptance(3, 4)}}))
	s = reopen(t, s, fs)
	eq(t, loadT(t, s), epoch.State{Acceptor: []epoch.AcceptorRecord{promise(2, 1), acceptance(3, 4)}})
}

// S3: the learned epoch only moves forward, and advancing it prunes the
// acceptor records of decided instances.
func TestLearnedEpochOnlyMovesForward(t *testing.T) {
	fs := vfs.NewMem()
	s := openT(t, fs, testOptions(fs))
	noErr(t, s.Commit(Writes{Acceptor: []epoch.AcceptorRecord{promise(4, 1), acceptance(5, 2), promise(6, 3), promise(7, 1)}}))
	noErr(t, s.Commit(Writes{Learned: testLearned(5)}))
	eq(t, loadT(t, s), epoch.State{Acceptor: []epoch.AcceptorRecord{promise(6, 3), promise(7, 1)}, Learned: testLearned(5)})

	s = reopen(t, s, fs)
	err := s.Commit(Writes{Learned: testLearned(4), Acceptor: []epoch.AcceptorRecord{promise(8, 1)}})
	isErr(t, err, ErrEpochRegression)
	errContains(t, err, testDir, "learned epoch 5", "epoch 4")

	forked := testLearned(5)
	forked.Epoch.Members = forked.Epoch.Members[:2]
	isErr(t, s.Commit(Writes{Learned: forked}), ErrEpochConflict)

	// The same epoch again is fine and keeps the first certificate.
	again := testLearned(5)
	again.Cert.Ballot.Counter = 99
	noErr(t, s.Commit(Writes{Learned: again}))
	// A record for a decided instance is dropped, not stored.
	noErr(t, s.Commit(Writes{Acceptor: []epoch.AcceptorRecord{promise(5, 9)}}))

	s = reopen(t, s, fs)
	eq(t, loadT(t, s), epoch.State{Acceptor: []epoch.AcceptorRecord{promise(6, 3), promise(7, 1)}, Learned: testLearned(5)})
}

func TestGatePassedMarkers(t *testing.T) {
	fs := vfs.NewMem()
	s := openT(t, fs, testOptions(fs))
	// A gate starts when its epoch is learned: no marker before that.
	err := s.Commit(Writes{GatePassed: []uint64{1}, Acceptor: []epoch.AcceptorRecord{promise(1, 1)}})
	isErr(t, err, ErrInvalidWrite)
	eq(t, loadT(t, s), epoch.State{})

	noErr(t, s.Commit(Writes{Learned: testLearned(3), GatePassed: []uint64{2, 3}}))
	isErr(t, s.Commit(Writes{GatePassed: []uint64{4}}), ErrInvalidWrite)
	s = reopen(t, s, fs)
	for n, want := range map[uint64]bool{1: false, 2: true, 3: true, 4: false} {
		got, err := s.GatePassed(n)
		noErr(t, err)
		if got != want {
			t.Errorf("GatePassed(%d) = %t, want %t", n, got, want)
		}
	}
}

// An invalid record refuses the whole Commit: nothing of it is written.
func TestCommitIsAllOrNothing(t *testing.T) {
	fs := vfs.NewMem()
	s := openT(t, fs, testOptions(fs))
	bad := epoch.AcceptorRecord{Instance: 9, Accepted: msg.Ballot{Counter: 1}}
	err := s.Commit(Writes{Learned: testLearned(2), Acceptor: []epoch.AcceptorRecord{promise(3, 1), bad}})
	isErr(t, err, ErrInvalidWrite)
	s = reopen(t, s, fs)
	eq(t, loadT(t, s), epoch.State{})
	noErr(t, s.Commit(Writes{Learned: testLearned(1)})) // the refused Learned left no trace
}

func TestBumpIncarnation(t *testing.T) {
	fs := vfs.NewMem()
	s := openT(t, fs, testOptions(fs))
	eq(t, s.Incarnation(), uint64(0))
	for want := uint64(1); want <= 3; want++ {
		got, err := s.BumpIncarnation()
		noErr(t, err)
		eq(t, got, want)
		eq(t, s.Incarnation(), want)
	}
	s = reopen(t, s, fs)
	eq(t, s.Incarnation(), uint64(0)) // the stored 3 belongs to the previous start
	got, err := s.BumpIncarnation()
	noErr(t, err)
	eq(t, got, uint64(4))
}

func TestBumpIncarnationExhausted(t *testing.T) {
	fs := vfs.NewMem()
	s := openT(t, fs, testOptions(fs))
	noErr(t, s.DB().Set(incarnationKey, encodeIncarnation(1<<64-1), nil))
	_, err := s.BumpIncarnation()
	isErr(t, err, ErrIncarnationExhausted)
}

// Concurrent writers are serialized (run with -race to check the locking).
func TestConcurrentWrites(t *testing.T) {
	fs := vfs.NewMem()
	s := openT(t, fs, testOptions(fs))
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 20 {
				n := uint64(100 + w*20 + i)
				if err := s.Commit(Writes{Acceptor: []epoch.AcceptorRecord{promise(n, 1)}}); err != nil {
					t.Error(err)
				}
				if _, err := s.BumpIncarnation(); err != nil {
					t.Error(err)
				}
				if _, err := s.LoadEpochState(); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	eq(t, len(loadT(t, s).Acceptor), 80)
	inc, err := s.BumpIncarnation()
	noErr(t, err)
	eq(t, inc, uint64(81))
}
