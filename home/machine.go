package home

import (
	"fmt"
	"time"

	"github.com/homelock/homelock/epoch"
	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/internal/deadline"
	"github.com/homelock/homelock/internal/intern"
	"github.com/homelock/homelock/internal/keytab"
	"github.com/homelock/homelock/internal/outbuf"
	"github.com/homelock/homelock/msg"
)

// epochView is one epoch this incarnation knows: learned while running, or
// restored from the store at start.
type epochView struct {
	e    msg.Epoch
	ring *epoch.Ring
	// prev is the ring of epoch e.Number-1 from the certificate; nil when that
	// epoch had no homes (epoch 0, the bootstrap list).
	prev      *epoch.Ring
	learnedAt time.Time
	// restored epochs were learned by an earlier incarnation: the restart gate
	// covers them, not the activation term.
	restored bool
}

// maxHistory bounds the epochs kept for gate computation. A key whose chain
// reaches past it is treated as moved in, which only lengthens its gate.
const maxHistory = 8

// Machine is the arbiter for the keys this node is home for (see doc.go).
type Machine struct {
	cfg   Config
	start time.Time

	history   []epochView
	liveUntil time.Time

	// restartGate is start + EpochLease + Skew for an incarnation above 1,
	// until both the current-epoch marker and reclaim waive it.
	restartGate   time.Time
	markerAtStart bool // marker for the restored epoch was persisted
	reclaimWait   map[msg.NodeID]msg.Member
	reclaimSentAt time.Time
	markerWritten map[uint64]bool

	keys    keytab.Table[entry]
	timers  deadline.Heap[entry]
	counter uint64
	live    int
	byHold  map[msg.NodeID]int
	// needLiveness holds keys whose head waiter waits only for liveness.
	needLiveness map[string]struct{}
	// peers are the holders the delegations name.
	peers intern.Table[peer]
	// mints are the live delegations' tokens but their counters.
	mints intern.Table[mint]

	stats Stats
	// waiting is Stats.Waiting, kept as waiters join and leave, so that
	// Stats counts no keys.
	waiting int
	out     Output
	// kept keeps out.Msgs's array from step to step (Ready).
	kept outbuf.Kept
}

// New returns a home for incarnation cfg.Inc started at now. learned is the
// epoch restored from the store (nil if none); marker says whether its
// gate-passed marker was persisted by an earlier incarnation.
func New(cfg Config, now time.Time, learned *epoch.Learned, marker bool) *Machine {
	m := &Machine{
		cfg:           cfg,
		start:         now,
		keys:          keytab.New(func(ke *entry) string { return ke.key }),
		timers:        deadline.NewHeap(func(ke *entry) *uint32 { return &ke.pos }),
		byHold:        make(map[msg.NodeID]int),
		needLiveness:  make(map[string]struct{}),
		markerWritten: make(map[uint64]bool),
		markerAtStart: marker,
	}
	if cfg.Inc > 1 && !cfg.Mutations.noRestartGate() {
		// The gate's Skew is margin: every record the last incarnation kept
		// ends within its liveness (D3), on this same lease clock, so
		// EpochLease alone outlasts them (the simulator's switch for it,
		// RestartGateNoSkew, was retired when nothing could catch it).
		m.restartGate = now.Add(cfg.EpochLease + cfg.Skew)
	}
	if learned != nil {
		m.history = append(m.history, newView(*learned, now, true))
		if marker {
			m.markerWritten[learned.Epoch.Number] = true
		}
		if cfg.Inc > 1 {
			m.startReclaim(now, learned.Epoch)
		}
	}
	return m
}

func newView(l epoch.Learned, at time.Time, restored bool) epochView {
	v := epochView{e: l.Epoch, ring: epoch.NewRing(l.Epoch), learnedAt: at, restored: restored}
	if l.Cert.Prev.Number >= 1 && len(l.Cert.Prev.Members) > 0 {
		v.prev = epoch.NewRing(l.Cert.Prev)
	}
	return v
}

// current is the newest epoch this node knows; nil before the first.
func (m *Machine) current() *epochView {
	if len(m.history) == 0 {
		return nil
	}
	return &m.history[len(m.history)-1]
}

// view returns the epoch numbered n if this incarnation knows it.
func (m *Machine) view(n uint64) (int, *epochView) {
	for i := len(m.history) - 1; i >= 0; i-- {
		if m.history[i].e.Number == n {
			return i, &m.history[i]
		}
	}
	return -1, nil
}

// OnEpoch tells the home that epoch l was learned (and synced) at now. Keys
// that moved away are recalled and their waiters redirected; delegations of
// members that left are recalled (H14).
func (m *Machine) OnEpoch(now time.Time, l epoch.Learned) {
	if cur := m.current(); cur != nil && l.Epoch.Number <= cur.e.Number {
		return
	}
	m.history = append(m.history, newView(l, now, false))
	if len(m.history) > maxHistory {
		m.history = append(m.history[:0], m.history[len(m.history)-maxHistory:]...)
	}
	for _, key := range m.keys.Keys() {
		m.serve(now, key, m.keys.Get(key))
	}
}

// SetLiveness records this node's epoch liveness; grants are clamped to it.
func (m *Machine) SetLiveness(now, until time.Time) {
	grew := until.After(m.liveUntil)
	m.liveUntil = until
	if !grew || !m.isLive(now) {
		return
	}
	for _, key := range deadline.SortedKeys(m.needLiveness) {
		delete(m.needLiveness, key)
		if ke := m.keys.Get(key); ke != nil {
			m.serve(now, key, ke)
		}
	}
}

// isLive reports whether the home may grant a useful lease now.
func (m *Machine) isLive(now time.Time) bool {
	cur := m.current()
	return cur != nil && cur.e.Number >= 1 && m.liveLeft(now) >= m.cfg.MinUseful
}

// liveLeft is the longest lease the home may grant or renew now: its record
// of the delegation lasts the lease plus Skew, and must end within its
// epoch liveness (D3).
func (m *Machine) liveLeft(now time.Time) time.Duration {
	end := m.liveUntil
	if !m.cfg.Mutations.viewPastLiveness() {
		// On the time, not the Duration: with no liveness (the zero time)
		// Sub saturates, and taking Skew off that would wrap around.
		end = end.Add(-m.cfg.Skew)
	}
	return end.Sub(now)
}

// restartGateEnd is the restart gate still in force, or zero once waived.
func (m *Machine) restartGateEnd() time.Time {
	if m.restartGate.IsZero() {
		return time.Time{}
	}
	if (m.markerAtStart || m.cfg.Mutations.waiveRestartWithoutMarker()) && m.reclaimWait != nil && len(m.reclaimWait) == 0 {
		return time.Time{}
	}
	return m.restartGate
}

// Tick runs what is due at now: expiries, gates that passed, stale waiters,
// DrainQuery and reclaim resends, gate-passed markers.
func (m *Machine) Tick(now time.Time) {
	for {
		ke, ok := m.timers.PopDue(deadline.At(now))
		if !ok {
			break
		}
		// A forgotten entry leaves the heap; should one ever be scheduled
		// after that, it must not be served in place of the key's live one.
		if m.keys.Get(ke.key) == ke {
			m.serve(now, ke.key, ke)
		}
	}
	m.tickReclaim(now)
	m.tickMarker(now)
}

// NextDeadline is when Tick next has work; zero when none.
func (m *Machine) NextDeadline() time.Time {
	d := m.timers.Next().Time()
	d = earliest(d, m.reclaimDeadline())
	d = earliest(d, m.markerDeadline())
	return d
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// tickMarker persists, once per epoch, that its gate fully passed, so that a
// later restart with a completed reclaim may skip the restart gate.
func (m *Machine) tickMarker(now time.Time) {
	if d := m.markerDeadline(); !d.IsZero() && !now.Before(d) {
		n := m.current().e.Number
		m.markerWritten[n] = true
		m.out.GatePassed = append(m.out.GatePassed, n)
	}
}

func (m *Machine) markerDeadline() time.Time {
	cur := m.current()
	if cur == nil || cur.e.Number == 0 || m.markerWritten[cur.e.Number] {
		return time.Time{}
	}
	d := m.restartGate
	if !cur.restored {
		d = later(d, cur.learnedAt.Add(m.cfg.EpochLease+m.cfg.Skew))
	}
	if d.IsZero() {
		d = cur.learnedAt
	}
	return d
}

// Live is the number of live delegations this home granted (Stats.Live),
// without Stats' scan of the waiters.
func (m *Machine) Live() int { return m.live }

// Stats returns the home's counters.
func (m *Machine) Stats() Stats {
	s := m.stats
	s.Live, s.Waiting = m.live, m.waiting
	return s
}

// CheckGauges recounts Stats.Waiting over every key and reports a
// disagreement, for checkers (a scan: not for production paths).
func (m *Machine) CheckGauges() error {
	n := 0
	for ke := range m.keys.All() {
		n += len(ke.waiters())
	}
	if n != m.waiting {
		return fmt.Errorf("home gauge waiting=%d, keys say %d", m.waiting, n)
	}
	return nil
}

// Holding returns the live delegation the home recorded for key, for checkers.
func (m *Machine) Holding(key string) (fence.Token, msg.NodeID, bool) {
	ke := m.keys.Get(key)
	if ke == nil || ke.deleg() == nil {
		return fence.Token{}, "", false
	}
	return m.dtok(ke).Token(), m.holder(ke).ID, true
}

// IsHome reports whether this node is key's home in its current epoch.
func (m *Machine) IsHome(key string) bool {
	cur := m.current()
	if cur == nil {
		return false
	}
	h, ok := cur.ring.Home(key)
	return ok && h.Same(m.cfg.Self) // a store the epoch does not list is home for nothing (H17, H25)
}
