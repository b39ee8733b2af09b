package localstore

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/homelock/homelock/epoch"
	"github.com/homelock/homelock/msg"
)

var (
	crashSeed  = flag.Uint64("localstore.seed", 0, "run TestCrashRandomSequences for this seed only")
	crashSeeds = flag.Int("localstore.seeds", 10, "number of seeds TestCrashRandomSequences runs")
	crashOps   = flag.Int("localstore.ops", 300, "operations per seed in TestCrashRandomSequences")
)

// crashFS wraps a crashable MemFS and can take a crash image in the middle of
// an operation: armed with k, it clones the filesystem at the k-th following
// Sync (before or after that sync reaches the disk), which is a crash at the
// moment Pebble was waiting for the disk. Unsynced data makes it into the
// image with a random probability, so torn WAL tails are part of the test.
type crashFS struct {
	vfs.FS
	mem *vfs.MemFS

	mu    sync.Mutex
	rng   *rand.Rand
	armed int
	after bool
	image *vfs.MemFS
}

func newCrashFS(mem *vfs.MemFS, rng *rand.Rand) *crashFS {
	return &crashFS{FS: mem, mem: mem, rng: rng}
}

// crash returns a possible state of the disk if the machine died now.
func (f *crashFS) crash() *vfs.MemFS {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.crashLocked()
}

func (f *crashFS) crashLocked() *vfs.MemFS {
	return f.mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: f.rng.IntN(101), RNG: f.rng})
}

func (f *crashFS) arm(k int, after bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed, f.after, f.image = k, after, nil
}

// disarm returns the image taken since arm, or nil if no sync fired.
func (f *crashFS) disarm() *vfs.MemFS {
	f.mu.Lock()
	defer f.mu.Unlock()
	img := f.image
	f.armed, f.image = 0, nil
	return img
}

func (f *crashFS) sync(do func() error) error {
	f.mu.Lock()
	fire := false
	if f.armed > 0 {
		f.armed--
		fire = f.armed == 0
	}
	if fire && !f.after {
		f.image = f.crashLocked()
	}
	f.mu.Unlock()
	err := do()
	if fire && f.after {
		f.mu.Lock()
		f.image = f.crashLocked()
		f.mu.Unlock()
	}
	return err
}

func (f *crashFS) wrap(file vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return crashFile{File: file, fs: f}, nil
}

func (f *crashFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return f.wrap(f.FS.Create(name, c))
}

func (f *crashFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, o ...vfs.OpenOption) (vfs.File, error) {
	return f.wrap(f.FS.OpenReadWrite(name, c, o...))
}

func (f *crashFS) ReuseForWrite(old, name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return f.wrap(f.FS.ReuseForWrite(old, name, c))
}

func (f *crashFS) OpenDir(name string) (vfs.File, error) { return f.wrap(f.FS.OpenDir(name)) }

func (f *crashFS) Unwrap() vfs.FS { return f.mem }

type crashFile struct {
	vfs.File
	fs *crashFS
}

func (c crashFile) Sync() error     { return c.fs.sync(c.File.Sync) }
func (c crashFile) SyncData() error { return c.fs.sync(c.File.SyncData) }

// durable is what the store must hold: the acknowledged state (S1, S3).
type durable struct {
	inc      uint64
	acceptor map[uint64]epoch.AcceptorRecord
	learned  *epoch.Learned
	gates    map[uint64]bool
}

func (d durable) clone() durable {
	c := durable{inc: d.inc, learned: d.learned, acceptor: map[uint64]epoch.AcceptorRecord{}, gates: map[uint64]bool{}}
	for k, v := range d.acceptor {
		c.acceptor[k] = v
	}
	for k := range d.gates {
		c.gates[k] = true
	}
	return c
}

// apply is the reference model of Commit, written as plainly as possible.
// It returns false where Commit must refuse.
func (d *durable) apply(w Writes) bool {
	if d.learned != nil && w.Learned != nil && w.Learned.Epoch.Number < d.learned.Epoch.Number {
		return false
	}
	if w.Learned != nil && (d.learned == nil || w.Learned.Epoch.Number > d.learned.Epoch.Number) {
		d.learned = w.Learned
		for n := range d.acceptor {
			if n <= d.learned.Epoch.Number {
				delete(d.acceptor, n)
			}
		}
	}
	for _, r := range w.Acceptor {
		if d.learned == nil || r.Instance > d.learned.Epoch.Number {
			d.acceptor[r.Instance] = r
		}
	}
	for _, n := range w.GatePassed {
		d.gates[n] = true
	}
	return true
}

func (d durable) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "inc=%d learned=", d.inc)
	if d.learned != nil {
		fmt.Fprintf(&b, "%d", d.learned.Epoch.Number)
	} else {
		b.WriteString("none")
	}
	fmt.Fprintf(&b, " acceptor=%v gates=%v", d.acceptor, d.gates)
	return b.String()
}

func (d durable) summary() string {
	var learned uint64
	if d.learned != nil {
		learned = d.learned.Epoch.Number
	}
	return fmt.Sprintf("inc=%d learned=%d acceptor records=%d gate markers=%d", d.inc, learned, len(d.acceptor), len(d.gates))
}

func (d durable) equal(o durable) bool {
	return fmt.Sprintf("%#v", d.norm()) == fmt.Sprintf("%#v", o.norm())
}

// norm makes two durable values with equal contents print the same.
func (d durable) norm() any {
	type rec struct {
		N uint64
		R epoch.AcceptorRecord
		V msg.Epoch
	}
	var recs []rec
	for n := uint64(0); n < 1000; n++ {
		if r, ok := d.acceptor[n]; ok {
			x := rec{N: n, R: r}
			if r.Value != nil {
				x.V, x.R.Value = *r.Value, nil
			}
			recs = append(recs, x)
		}
	}
	var gates []uint64
	for n := uint64(0); n < 1000; n++ {
		if d.gates[n] {
			gates = append(gates, n)
		}
	}
	var l any
	if d.learned != nil {
		l = *d.learned
	}
	return []any{d.inc, recs, l, gates}
}

// readDurable reads back everything the model tracks.
func readDurable(t *testing.T, s *Store, maxEpoch uint64) durable {
	t.Helper()
	st, err := s.LoadEpochState()
	noErr(t, err)
	d := durable{learned: st.Learned, acceptor: map[uint64]epoch.AcceptorRecord{}, gates: map[uint64]bool{}}
	for _, r := range st.Acceptor {
		d.acceptor[r.Instance] = r
	}
	for n := uint64(0); n <= maxEpoch+2; n++ {
		ok, err := s.GatePassed(n)
		noErr(t, err)
		if ok {
			d.gates[n] = true
		}
	}
	v, err := s.get(incarnationKey)
	noErr(t, err)
	if v != nil {
		d.inc, err = decodeIncarnation(v)
		noErr(t, err)
	}
	return d
}

// op is one step of a random sequence.
type op struct {
	desc string
	bump bool
	w    Writes
	// refuse is set for a Commit the store must refuse (an older Learned).
	refuse bool
}

func randomOp(rng *rand.Rand, d durable) op {
	var learned uint64
	if d.learned != nil {
		learned = d.learned.Epoch.Number
	}
	randBallot := func() msg.Ballot {
		return msg.Ballot{Counter: 1 + rng.Uint64N(50), Node: msg.NodeID(fmt.Sprintf("n%d", 1+rng.IntN(5)))}
	}
	switch p := rng.IntN(100); {
	case p < 15:
		return op{desc: "bump", bump: true}
	case p < 55:
		var w Writes
		for range 1 + rng.IntN(3) {
			r := epoch.AcceptorRecord{Instance: learned + 1 + rng.Uint64N(4), Promised: randBallot()}
			if rng.IntN(2) == 0 {
				r.Accepted = randBallot()
				v := testEpoch(r.Instance)
				v.Members = v.Members[:1+rng.IntN(3)]
				r.Value = &v
			}
			w.Acceptor = append(w.Acceptor, r)
		}
		return op{desc: fmt.Sprintf("acceptor %d records from instance %d", len(w.Acceptor), w.Acceptor[0].Instance), w: w}
	case p < 75:
		w := Writes{Learned: testLearned(learned + 1 + rng.Uint64N(2))}
		if rng.IntN(3) == 0 {
			w.GatePassed = []uint64{w.Learned.Epoch.Number - rng.Uint64N(2)}
		}
		if rng.IntN(3) == 0 {
			w.Acceptor = []epoch.AcceptorRecord{promise(w.Learned.Epoch.Number+1, 1+rng.Uint64N(9))}
		}
		return op{desc: fmt.Sprintf("learn %d gates %v", w.Learned.Epoch.Number, w.GatePassed), w: w}
	case p < 90 && learned > 0:
		n := learned - rng.Uint64N(min(learned, 3))
		return op{desc: fmt.Sprintf("gate %d", n), w: Writes{GatePassed: []uint64{n}}}
	case learned > 1:
		return op{desc: fmt.Sprintf("regress to %d", learned-1), w: Writes{Learned: testLearned(learned - 1)}, refuse: true}
	}
	return op{desc: "bump", bump: true}
}

func (o op) run(s *Store) error {
	if o.bump {
		_, err := s.BumpIncarnation()
		return err
	}
	return s.Commit(o.w)
}

// S1 and S3 under crashes: across random operation sequences with crashes at
// random points, including in the middle of a Commit or BumpIncarnation,
// every acknowledged write survives, an interrupted one is all there or not
// at all, and the learned epoch never goes back.
func TestCrashRandomSequences(t *testing.T) {
	seeds := make([]uint64, 0, *crashSeeds)
	if *crashSeed != 0 {
		seeds = append(seeds, *crashSeed)
	} else {
		for i := range *crashSeeds {
			seeds = append(seeds, uint64(i+1))
		}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { runCrashSequence(t, seed, *crashOps) })
	}
}

func runCrashSequence(t *testing.T, seed uint64, ops int) {
	rng := rand.New(rand.NewPCG(seed, 0))
	fs := newCrashFS(vfs.NewCrashableMem(), rand.New(rand.NewPCG(seed, 1)))
	var history []string
	fail := func(format string, args ...any) {
		t.Helper()
		start := max(0, len(history)-12)
		t.Fatalf("seed %d: %s\nlast operations:\n  %s\nreplay: go test ./localstore -run 'TestCrashRandomSequences' -localstore.seed=%d -localstore.ops=%d -v",
			seed, fmt.Sprintf(format, args...), strings.Join(history[start:], "\n  "), seed, ops)
	}
	open := func() *Store {
		s, err := Open(testDir, testOptions(fs))
		if err != nil {
			fail("reopen after crash: %v", err)
		}
		return s
	}
	s := open()
	defer func() { s.Close() }()
	model := durable{acceptor: map[uint64]epoch.AcceptorRecord{}, gates: map[uint64]bool{}}
	crashes := 0
	// outcomes counts restarts by what survived: [0] between operations,
	// [1] mid-operation with the write lost, [2] mid-operation with it kept.
	var outcomes [3]int

	// restart closes the running store (its process is gone), boots a fresh
	// filesystem from the crash image and checks it against the allowed
	// states.
	restart := func(img *vfs.MemFS, allowed ...durable) {
		t.Helper()
		crashes++
		noErr(t, s.Close())
		fs = newCrashFS(img, rand.New(rand.NewPCG(seed, uint64(crashes)+1)))
		s = open()
		var maxEpoch uint64
		for _, d := range allowed {
			if d.learned != nil {
				maxEpoch = max(maxEpoch, d.learned.Epoch.Number)
			}
		}
		got := readDurable(t, s, maxEpoch)
		for i, d := range allowed {
			if got.equal(d) {
				model = d
				outcomes[i+len(allowed)-1]++
				return
			}
		}
		var want []string
		for _, d := range allowed {
			want = append(want, d.String())
		}
		fail("after crash %d the store holds\n  %s\nwant one of\n  %s", crashes, got, strings.Join(want, "\n  "))
	}

	for i := range ops {
		o := randomOp(rng, model)
		before := model.clone()
		after := model.clone()
		switch {
		case o.bump:
			after.inc++
		case !o.refuse:
			if !after.apply(o.w) {
				fail("model refuses %s", o.desc)
			}
		}
		midCrash := rng.IntN(8) == 0
		if midCrash {
			fs.arm(1+rng.IntN(2), rng.IntN(2) == 0)
		}
		err := o.run(s)
		img := fs.disarm()
		history = append(history, fmt.Sprintf("#%d %s (crash armed %t, fired %t) -> %v", i, o.desc, midCrash, img != nil, err))
		if o.refuse {
			if err == nil {
				fail("%s was acknowledged", o.desc)
			}
			after = before
		} else if err != nil {
			fail("%s: %v", o.desc, err)
		}
		if img != nil {
			// The crash came before the caller saw Commit return: the write
			// was never acknowledged, so either state is allowed.
			restart(img, before, after)
			continue
		}
		model = after
		if rng.IntN(15) == 0 {
			history = append(history, fmt.Sprintf("#%d crash between operations", i))
			restart(fs.crash(), model)
		}
	}
	if crashes == 0 {
		t.Fatalf("seed %d: no crash happened; the test proves nothing", seed)
	}
	t.Logf("seed %d: %d operations, %d crashes (%d between operations, %d mid-operation lost the write, %d kept it), final %s",
		seed, ops, crashes, outcomes[0], outcomes[1], outcomes[2], model.summary())
}

// The incarnation strictly increases across any number of crash and reopen
// cycles, including crashes in the middle of BumpIncarnation: a value handed
// out once is never handed out again.
func TestIncarnationIncreasesAcrossCrashes(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	fs := newCrashFS(vfs.NewCrashableMem(), rand.New(rand.NewPCG(7, 8)))
	var last uint64
	for cycle := range 150 {
		s, err := Open(testDir, testOptions(fs))
		noErr(t, err)
		if rng.IntN(3) == 0 {
			fs.arm(1, rng.IntN(2) == 0)
		}
		inc, err := s.BumpIncarnation()
		noErr(t, err)
		img := fs.disarm()
		if img == nil {
			// Acknowledged: it must exceed every value handed out before.
			if inc <= last {
				t.Fatalf("cycle %d: incarnation %d after %d", cycle, inc, last)
			}
			last = inc
			if rng.IntN(2) == 0 {
				img = fs.crash()
			}
		}
		noErr(t, s.Close())
		if img != nil {
			fs = newCrashFS(img, rand.New(rand.NewPCG(7, uint64(cycle)+9)))
		}
	}
	if last < 75 {
		t.Fatalf("only %d acknowledged bumps in 150 cycles", last)
	}
}

// A crash at any sync of the very first Open leaves either an empty
// directory (a fresh start is then correct: nothing was acknowledged), a
// directory Open refuses with ErrMissingIdentity, or the full identity. It
// never leaves a directory that Open silently re-creates (S2).
func TestCrashDuringCreate(t *testing.T) {
	for k := 1; ; k++ {
		for _, after := range []bool{false, true} {
			fs := newCrashFS(vfs.NewCrashableMem(), rand.New(rand.NewPCG(uint64(k), 0)))
			fs.arm(k, after)
			s, err := Open(testDir, testOptions(fs))
			noErr(t, err)
			img := fs.disarm()
			id := s.Identity()
			noErr(t, s.Close())
			if img == nil {
				t.Logf("creating a store takes %d syncs", k-1)
				if k < 3 {
					t.Fatalf("creating a store took only %d syncs", k-1)
				}
				return
			}
			empty, err := isEmptyDir(img, testDir)
			noErr(t, err)
			s, err = Open(testDir, testOptions(img))
			switch {
			case empty && err == nil:
				// Nothing reached the disk; a fresh start loses nothing.
			case err == nil:
				if s.Identity() != id {
					t.Fatalf("sync %d: reopened as %+v, created as %+v", k, s.Identity(), id)
				}
			default:
				isErr(t, err, ErrMissingIdentity)
			}
			if err == nil {
				noErr(t, s.Close())
			}
		}
	}
}

// The crash harness is only worth something if it notices a missing sync:
// with Commit's writes left unsynced, an acknowledged promise is lost in the
// crash. The write counter (S4) notices it first: Open refuses the store
// rather than open it without the promise.
func TestCrashHarnessCatchesUnsyncedCommit(t *testing.T) {
	mem := vfs.NewCrashableMem()
	s, err := Open(testDir, testOptions(mem))
	noErr(t, err)
	s.writeOpts = pebble.NoSync
	noErr(t, s.Commit(Writes{Acceptor: []epoch.AcceptorRecord{promise(1, 5)}}))
	img := mem.CrashClone(vfs.CrashCloneCfg{})
	noErr(t, s.Close())

	s, err = Open(testDir, testOptions(img))
	if err == nil {
		st := loadT(t, s)
		s.Close()
		t.Fatalf("store with an unsynced promise opened after the crash, holding %+v", st)
	}
	isErr(t, err, ErrCorrupt)
	errContains(t, err, "holds write 1 but write 2 was acknowledged")
}
