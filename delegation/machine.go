package delegation

import (
	"fmt"
	"strings"
	"time"

	"github.com/homelock/homelock/epoch"
	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/internal/deadline"
	"github.com/homelock/homelock/internal/intern"
	"github.com/homelock/homelock/internal/outbuf"
	"github.com/homelock/homelock/msg"
)

// Machine is the holder side for every key this node locks (see doc.go).
type Machine struct {
	cfg  Config
	ring *epoch.Ring
	// memberSince is the first epoch this process learned with its own
	// store among the members (0: none yet). It asks for keys only as a
	// member, so a Grant stamped with an earlier epoch answered someone
	// else: the node's old store, if it was wiped, whose requests were
	// numbered as this store's are (H31).
	memberSince uint64
	// versions is non-empty while the epoch's members do not all run this
	// node's protocol version, timings while a peer advertises other safety
	// timings: cluster locks fail closed, and each says who runs what.
	// mixed is the first of them set (remix), kept for the admission path.
	mixed, versions, timings string
	// shards hold the keys (Config.Shards): a key's state, wake-up and
	// critical section are in the shard ShardOf names.
	shards  []shard
	seq     uint64
	origins intern.Table[origin]
	stats   Stats
	out     Output
	// kept keeps out's arrays from step to step (Ready).
	kept struct{ msgs, events outbuf.Kept }

	// gauges are kept as keys change (setPhase, setQueue): Stats reads them
	// instead of scanning every key.
	gauges struct {
		phases   [held + 1]int
		deferred int
	}
}

// New returns a holder for incarnation cfg.Inc.
func New(cfg Config) *Machine {
	m := &Machine{cfg: cfg, shards: make([]shard, max(cfg.Shards, 1))}
	for i := range m.shards {
		m.shards[i] = newShard()
	}
	return m
}

// Ready returns what the inputs since the last call asked for and resets it.
// Its slices are good until the machine's next call: the driver copies them
// out at once (core's flush), so the machine keeps their arrays for the next
// step's instead of allocating them in every step that sends or reports.
func (m *Machine) Ready() Output {
	o := m.out
	m.out.Msgs = outbuf.Keep(&m.kept.msgs, o.Msgs)
	m.out.Events = outbuf.Keep(&m.kept.events, o.Events)
	return o
}

func (m *Machine) send(to msg.NodeID, body msg.Body) {
	m.out.Msgs = append(m.out.Msgs, msg.Envelope{To: to, Body: body})
}

func (m *Machine) event(e Event) { m.out.Events = append(m.out.Events, e) }

// shorten applies the drift bound to a lease measured on this clock.
func (m *Machine) shorten(d time.Duration) time.Duration {
	if m.cfg.Mutations.leaseNoDrift() {
		return d
	}
	return d - time.Duration(float64(d)*m.cfg.MaxDrift)
}

// grantedBeforeMember reports whether a Grant stamped with epoch e was made
// before this store was a member: e is an epoch this process has learned,
// or an earlier one, and comes before the first it learned with its own
// store among the members (or it has learned none such). A Grant stamped
// with an epoch ahead of what this process has learned (a bootstrap whose
// Learn is still on its way) is judged by its home, as before.
func (m *Machine) grantedBeforeMember(e uint64) bool {
	return m.ring != nil && e <= m.ring.Epoch().Number && (m.memberSince == 0 || e < m.memberSince)
}

// OnEpoch retargets outstanding requests at the keys' homes in the new epoch.
// If the epoch's members do not all run this node's protocol version, every
// queued locker fails at once and nothing more is admitted: two versions are
// two arbiters, and a lock that is only usually exclusive is worse than none.
func (m *Machine) OnEpoch(now time.Time, e msg.Epoch) {
	m.ring = epoch.NewRing(e)
	if m.memberSince == 0 && e.Has(m.cfg.Self) {
		m.memberSince = e.Number
	}
	m.versions = versionMismatch(e, m.cfg.Self.Version)
	if m.cfg.Mutations.ignoreVersions() {
		m.versions = ""
	}
	if m.remix(now) {
		return
	}
	for _, key := range m.sortedKeys() {
		ks := m.get(key)
		if ks == nil || ks.phase != requested {
			continue
		}
		if h, ok := m.ring.Home(key); ok && !h.Same(ks.more().target) {
			x := ks.edit()
			x.target = h
			x.nextSend = now
			m.service(now, key, ks)
		}
	}
}

// OnTimings says why cluster locks must fail closed because a peer
// advertises other safety timings than this node's ("" when none does): a
// new home's gate sized by this node's EpochLease would not outlast an old
// home's liveness sized by a longer one (docs/design.md, H26).
func (m *Machine) OnTimings(now time.Time, why string) {
	if why == m.timings {
		return
	}
	m.timings = why
	m.remix(now)
}

// remix recomputes mixed; while cluster locks are unavailable, every queued
// locker fails at once and nothing more is admitted. It reports whether
// they are unavailable.
func (m *Machine) remix(now time.Time) bool {
	m.mixed = m.versions
	if m.mixed == "" {
		m.mixed = m.timings
	}
	if m.mixed == "" {
		return false
	}
	for _, key := range m.sortedKeys() {
		ks := m.get(key)
		for _, w := range ks.queue() {
			m.event(Event{Kind: Failed, Key: key, Locker: w.locker, Reason: ReasonUnavailable, Detail: m.mixed})
		}
		m.setQueue(ks, nil)
		m.service(now, key, ks)
	}
	return true
}

// versionMismatch describes the members that run another protocol version
// than v (a match is exact; 0 advertises none), or returns "".
func versionMismatch(e msg.Epoch, v uint32) string {
	var b strings.Builder
	for _, mem := range e.Members {
		if mem.Version != v {
			if b.Len() == 0 {
				fmt.Fprintf(&b, "cluster locks unavailable: this node runs protocol v%d but", v)
			}
			fmt.Fprintf(&b, " %s runs v%d", mem.ID, mem.Version)
		}
	}
	return b.String()
}

// Mixed says why cluster locks are unavailable ("" when they are not).
func (m *Machine) Mixed() string { return m.mixed }

// Tick runs what is due at now.
func (m *Machine) Tick(now time.Time) {
	at := deadline.At(now)
	for {
		s := m.nextDue(at)
		if s == nil {
			return
		}
		ks, _ := s.timers.PopDue(at)
		// A forgotten state leaves the heap; should one ever be scheduled
		// after that, it must not be served in place of the key's live one.
		if s.keys.Get(ks.key) == ks {
			m.service(now, ks.key, ks)
		}
	}
}

// NextDeadline is when Tick next has work; zero when none.
func (m *Machine) NextDeadline() time.Time {
	var next deadline.Instant
	for i := range m.shards {
		if at := m.shards[i].timers.Next(); !at.IsZero() && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	return next.Time()
}

// Stats returns the holder's counters.
func (m *Machine) Stats() Stats {
	s := m.stats
	for i := range m.shards {
		s.Admissions += m.shards[i].admissions
		s.LocalFast += m.shards[i].localFast
	}
	s.Held, s.Pending, s.Deferred = m.gauges.phases[held], m.gauges.phases[requested], m.gauges.deferred
	return s
}

// CheckGauges recounts Stats' gauges over every key and reports a
// disagreement, for checkers (a scan: not for production paths).
func (m *Machine) CheckGauges() error {
	var s Stats
	for i := range m.shards {
		for ks := range m.shards[i].keys.All() {
			switch ks.phase {
			case held:
				s.Held++
			case requested:
				s.Pending++
			}
			s.Deferred += len(ks.queue())
		}
	}
	if g := m.Stats(); g.Held != s.Held || g.Pending != s.Pending || g.Deferred != s.Deferred {
		return fmt.Errorf("delegation gauges held=%d pending=%d deferred=%d, keys say %d, %d, %d",
			g.Held, g.Pending, g.Deferred, s.Held, s.Pending, s.Deferred)
	}
	return nil
}

// Holding reports the delegation this node holds for key, for checkers:
// its token, its expiry on this node's clock, and whether a critical section
// is admitted.
func (m *Machine) Holding(key string) (tok fence.Token, expires time.Time, active bool, ok bool) {
	ks := m.get(key)
	if ks == nil || ks.phase != held {
		return fence.Token{}, time.Time{}, false, false
	}
	return m.tok(ks), ks.expires.Time(), ks.active != 0, true
}

// Lease is the lease of the delegation held for key as last granted or
// renewed (zero when none is held), for checkers.
func (m *Machine) Lease(key string) time.Duration {
	if ks := m.get(key); ks != nil && ks.phase == held {
		return m.lease(ks)
	}
	return 0
}

// HeldKeys lists, in order, the keys whose delegation this node holds.
func (m *Machine) HeldKeys() []string {
	var keys []string
	for _, key := range m.sortedKeys() {
		if m.get(key).phase == held {
			keys = append(keys, key)
		}
	}
	return keys
}

// ClockJump drops every delegation this node holds at once: its clock can no
// longer be trusted to expire them before their homes do (H9). For the same
// reason it forgets when its outstanding requests' attempts were sent: a
// Grant answering one of them would anchor its lease at a reading taken
// before the jump, so it is used as unanchored (given back) and the request
// asks again.
func (m *Machine) ClockJump(now time.Time) {
	for _, key := range m.sortedKeys() {
		ks := m.get(key)
		switch {
		case ks == nil:
		case ks.phase == held:
			m.lose(now, ks, key, "clock jump")
			m.service(now, key, ks)
		case ks.phase == requested && !m.cfg.Mutations.keepAnchorsOnJump():
			ks.edit().attempts = attemptLog{}
		}
	}
}
