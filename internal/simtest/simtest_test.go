package simtest

import (
	"errors"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/homelock/homelock/msg"
)

var base = time.Unix(1_000_000, 0)

func TestClock(t *testing.T) {
	for _, tc := range []struct {
		name   string
		offset time.Duration
		rate   float64
		at     time.Duration // true time after base
		local  time.Duration // local reading after base
	}{
		{"exact", 0, 1, 5 * time.Second, 5 * time.Second},
		{"ahead", time.Hour, 1, time.Second, time.Hour + time.Second},
		{"fast", 0, 1.01, 100 * time.Second, 101 * time.Second},
		{"slow and behind", -time.Minute, 0.99, 100 * time.Second, 99*time.Second - time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewClock(base, tc.offset, tc.rate)
			tt := base.Add(tc.at)
			require.Equal(t, base.Add(tc.local), c.Local(tt))
			// The same as the formula with time.Time arithmetic.
			require.Equal(t, base.Add(tc.offset+time.Duration(float64(tt.Sub(base))*tc.rate)), c.Local(tt))
			back := c.True(c.Local(tt))
			require.InDelta(t, 0, float64(back.Sub(tt)), 2, "True inverts Local within rounding")
		})
	}
}

func TestQueueOrdersByTimeThenPush(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var q Queue[int]
	type ev struct {
		at  int64
		seq uint64
	}
	var want []ev
	for i := range 2000 {
		at := r.Int64N(50) // many ties
		seq := q.Push(at, i)
		require.Equal(t, uint64(i+1), seq)
		want = append(want, ev{at, seq})
		if r.IntN(3) == 0 { // interleave pops with pushes
			sort.Slice(want, func(a, b int) bool {
				return want[a].at < want[b].at || want[a].at == want[b].at && want[a].seq < want[b].seq
			})
			gotAt, v := q.Pop()
			require.Equal(t, want[0].at, gotAt)
			require.Equal(t, int(want[0].seq)-1, v)
			want = want[1:]
		}
	}
	sort.Slice(want, func(a, b int) bool {
		return want[a].at < want[b].at || want[a].at == want[b].at && want[a].seq < want[b].seq
	})
	for _, w := range want {
		at, v := q.Pop()
		require.Equal(t, w.at, at)
		require.Equal(t, int(w.seq)-1, v)
	}
	require.Zero(t, q.Len())
}

func TestLinks(t *testing.T) {
	var l Links[string]
	require.False(t, l.Blocked("a", "b"))
	l.Cut("a", "b")
	require.True(t, l.Blocked("a", "b"))
	require.False(t, l.Blocked("b", "a"), "a cut is one way")
	l.Mend("a", "b")
	require.False(t, l.Blocked("a", "b"))

	r := rand.New(rand.NewPCG(3, 4))
	l.Drop = 1
	require.Equal(t, 0, l.Fate(r))
	l.Drop, l.Dup = 0, 1
	require.Equal(t, 2, l.Fate(r))
	l.Dup = 0
	require.Equal(t, 1, l.Fate(r))

	l.Cut("a", "c")
	l.Drop, l.Dup = 0.5, 0.5
	l.Delay.Tails[0] = Tail{OneIn: 2, Max: time.Second}
	l.Heal()
	require.False(t, l.Blocked("a", "c"))
	require.Zero(t, l.Drop+l.Dup)
	require.Equal(t, [2]Tail{}, l.Delay.Tails)
}

func TestDelayDraws(t *testing.T) {
	d := Delay{Base: time.Millisecond, Spread: time.Millisecond}
	r := rand.New(rand.NewPCG(5, 6))
	for range 1000 {
		x := d.Draw(r)
		require.GreaterOrEqual(t, x, time.Millisecond)
		require.Less(t, x, 2*time.Millisecond)
	}
	// A tail that is off draws nothing: the stream stays where it was.
	a, b := rand.New(rand.NewPCG(7, 8)), rand.New(rand.NewPCG(7, 8))
	off := Delay{Base: time.Millisecond, Spread: time.Millisecond, Tails: [2]Tail{{OneIn: 4}, {Max: time.Second}}}
	plain := Delay{Base: time.Millisecond, Spread: time.Millisecond}
	for range 100 {
		require.Equal(t, plain.Draw(a), off.Draw(b))
	}
	// A tail that always fires adds up to its Max.
	on := Delay{Base: time.Millisecond, Tails: [2]Tail{{OneIn: 1, Max: time.Second}}}
	var long bool
	for range 100 {
		x := on.Draw(r)
		require.Less(t, x, time.Second+time.Millisecond)
		long = long || x > 100*time.Millisecond
	}
	require.True(t, long)
}

func TestMailbox(t *testing.T) {
	var b Mailbox[int]
	b.Post(1, 2, 3, 4, 5)
	even := func(x int) bool { return x%2 == 0 }
	m, ok := b.Take(even)
	require.True(t, ok)
	require.Equal(t, 2, m)
	require.Equal(t, []int{1, 3, 4, 5}, b.All())
	require.Equal(t, 1, b.Drop(even))
	require.Equal(t, []int{1, 3, 5}, b.All())
	b.Insert(b.Index(func(x int) bool { return x == 3 })+1, 33)
	require.Equal(t, []int{1, 3, 33, 5}, b.All())
	b.Set(0, 11)
	require.Equal(t, 11, b.All()[0])
	require.Equal(t, 33, b.TakeAt(2))
	_, ok = b.Take(even)
	require.False(t, ok)
	b.Shuffle(rand.New(rand.NewPCG(1, 1)))
	require.ElementsMatch(t, []int{11, 3, 5}, b.All())
	b.Clear()
	require.Zero(t, b.Len())
}

type rec struct {
	inst uint64
	v    string
}

func TestDisk(t *testing.T) {
	d := NewDisk[rec, string](7)
	require.Nil(t, d.Learned())
	d.SyncAcceptor(3, rec{3, "a"})
	d.SyncAcceptor(1, rec{1, "b"})
	d.SyncAcceptor(3, rec{3, "c"}) // replaces
	require.Equal(t, []rec{{1, "b"}, {3, "c"}}, d.Acceptors())
	d.SyncLearned("e2")
	d.Prune(2)
	require.Equal(t, []rec{{3, "c"}}, d.Acceptors())
	require.Equal(t, "e2", *d.Learned())
	d.Markers[4], d.Markers[2] = true, true
	require.Equal(t, []uint64{2, 4}, d.MarkerList())
	d.Inc = 3
	d.Wipe(9)
	require.Equal(t, uint64(9), d.Store)
	require.Zero(t, d.Inc)
	require.Nil(t, d.Learned())
	require.Empty(t, d.Acceptors())
	require.Empty(t, d.MarkerList())
}

func epochOf(num uint64, ids ...string) msg.Epoch {
	e := msg.Epoch{Number: num}
	for i, id := range ids {
		e.Members = append(e.Members, msg.Member{ID: msg.NodeID(id), Store: uint64(i + 1)})
	}
	return e
}

func TestAgreement(t *testing.T) {
	at := func(d time.Duration) time.Time { return base.Add(d) }
	okCert := func(*msg.Epoch) error { return nil }
	for _, tc := range []struct {
		name string
		zero bool
		run  func(a *Agreement[string])
		want []string
	}{
		{"one chain", false, func(a *Agreement[string]) {
			a.Learned("a", at(0), epochOf(0, "a", "b"), nil)
			a.Learned("a", at(0), epochOf(1, "a", "b"), okCert)
			a.Learned("b", at(1), epochOf(1, "a", "b"), okCert)
			a.Learned("a", at(2), epochOf(2, "a"), okCert)
		}, nil},
		{"fork", false, func(a *Agreement[string]) {
			a.Learned("a", at(0), epochOf(1, "a", "b"), nil)
			a.Learned("b", at(1), epochOf(1, "b", "c"), nil)
		}, []string{InvEpochFork}},
		{"epoch 0 configured per node", true, func(a *Agreement[string]) {
			a.Learned("a", at(0), epochOf(0, "a", "b"), nil)
			a.Learned("c", at(0), epochOf(0, "c"), nil)
		}, nil},
		{"epoch 0 agreed", false, func(a *Agreement[string]) {
			a.Learned("a", at(0), epochOf(0, "a", "b"), nil)
			a.Learned("c", at(0), epochOf(0, "c"), nil)
		}, []string{InvEpochFork}},
		{"a number learned again", false, func(a *Agreement[string]) {
			a.Learned("a", at(0), epochOf(2, "a"), nil)
			a.Learned("a", at(1), epochOf(2, "a"), nil)
		}, []string{InvEpochGrows}},
		{"a wiped disk starts over", false, func(a *Agreement[string]) {
			a.Learned("a", at(0), epochOf(2, "a"), nil)
			a.Forget("a")
			a.Learned("a", at(1), epochOf(1, "a"), nil)
		}, nil},
		{"nobody learned the previous epoch", false, func(a *Agreement[string]) {
			a.Learned("a", at(0), epochOf(3, "a"), okCert)
		}, []string{InvEpochCert}},
		{"a certificate that does not verify", false, func(a *Agreement[string]) {
			a.Learned("a", at(0), epochOf(1, "a"), nil)
			a.Learned("a", at(1), epochOf(2, "a"), func(*msg.Epoch) error { return errors.New("no majority") })
		}, []string{InvEpochCert}},
		{"liveness within the gate", false, func(a *Agreement[string]) {
			a.Live(1, at(5*time.Second), 0)
			a.Learned("a", at(2*time.Second), epochOf(2, "a"), nil)
			a.Live(1, at(5*time.Second), 0)
		}, nil},
		{"liveness past the gate, granted later", false, func(a *Agreement[string]) {
			a.Learned("a", at(2*time.Second), epochOf(2, "a"), nil)
			a.Live(1, at(5*time.Second+2*time.Microsecond), 0)
		}, []string{InvEpochLive}},
		{"liveness past the gate, learned later", false, func(a *Agreement[string]) {
			a.Live(1, at(9*time.Second), 0)
			a.Learned("a", at(2*time.Second), epochOf(2, "a"), nil)
		}, []string{InvEpochLive}},
		// Lag is 100ms: a liveness runs on through an unseen stall under it.
		{"liveness past the gate by an unseen stall", false, func(a *Agreement[string]) {
			a.Learned("a", at(2*time.Second), epochOf(2, "a"), nil)
			a.Live(1, at(5*time.Second+80*time.Millisecond), 80*time.Millisecond)
		}, nil},
		{"liveness past the gate by more than its stall", false, func(a *Agreement[string]) {
			a.Learned("a", at(2*time.Second), epochOf(2, "a"), nil)
			a.Live(1, at(5*time.Second+80*time.Millisecond), 50*time.Millisecond)
		}, []string{InvEpochLive}},
		{"liveness past the gate by a stall over Lag", false, func(a *Agreement[string]) {
			a.Learned("a", at(2*time.Second), epochOf(2, "a"), nil)
			a.Live(1, at(5*time.Second+150*time.Millisecond), 150*time.Millisecond)
		}, []string{InvEpochLive}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			a := Agreement[string]{
				Fail:           func(inv, _ string, _ ...any) { got = append(got, inv) },
				EpochLease:     3 * time.Second,
				Lag:            100 * time.Millisecond,
				Base:           base,
				ConfiguredZero: tc.zero,
			}
			tc.run(&a)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestAgreementHighest(t *testing.T) {
	var a Agreement[int]
	a.Learned(1, base, epochOf(1, "a"), nil)
	a.Learned(1, base, epochOf(4, "a"), nil)
	require.Equal(t, uint64(4), a.Highest())
	require.True(t, slices.Equal([]string{"a/1"}, Members(epochOf(4, "a"))))
}

func TestClockChange(t *testing.T) {
	c := NewClock(base, 0, 1)
	at := func(d time.Duration) time.Time { return base.Add(d) }
	// At 10s the clock runs twice as fast, keeping its reading (10s).
	c.Change(at(10*time.Second), -10*time.Second, 2)
	// At 20s (reading 30s) it steps back by 5s: a suspend it missed.
	c.Change(at(20*time.Second), -15*time.Second, 2)
	for _, tc := range []struct{ true, local time.Duration }{
		{5 * time.Second, 5 * time.Second},   // before the first change
		{10 * time.Second, 10 * time.Second}, // at it
		{15 * time.Second, 20 * time.Second}, // fast
		{19 * time.Second, 28 * time.Second}, // just before the step
		{20 * time.Second, 25 * time.Second}, // stepped back
		{30 * time.Second, 45 * time.Second},
	} {
		require.Equal(t, at(tc.local), c.Local(at(tc.true)), "Local at %v", tc.true)
	}
	// True is the latest true time of a reading: 26s was read at 20.5s
	// after the step (and at 18s before it).
	require.Equal(t, at(20500*time.Millisecond), c.True(at(26*time.Second)))
	require.Equal(t, at(5*time.Second), c.True(at(5*time.Second)))
	require.Equal(t, at(15*time.Second), c.True(at(20*time.Second)))
	// A reading skipped by a step forward maps to the step.
	f := NewClock(base, 0, 1)
	f.Change(at(10*time.Second), 5*time.Second, 1) // jumps from 10s to 15s
	require.Equal(t, at(10*time.Second), f.True(at(12*time.Second)))
	require.Equal(t, at(11*time.Second), f.True(at(16*time.Second)))
}
