package core

import (
	"time"

	"github.com/homelock/homelock/delegation"
	"github.com/homelock/homelock/epoch"
	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/home"
	"github.com/homelock/homelock/internal/deadline"
	"github.com/homelock/homelock/internal/outbuf"
	"github.com/homelock/homelock/msg"
)

// Config configures the three machines of one node. Self and Inc are copied
// into each machine's config by New.
type Config struct {
	Self   msg.Member
	Inc    uint64
	Epoch  epoch.Config
	Home   home.Config
	Holder delegation.Config
	// Members paces failure detection, joins and gossip rejoins.
	Members MembersConfig
	// Observe, when set, sees every message the node sends (stamped) and
	// every message it acts on, in order: a simulator re-derives the
	// protocol's truth from them instead of trusting the machines' state.
	Observe func(env msg.Envelope, sent bool)
	// Reaches, when set, says whether a node's advertised address has been
	// shown to reach the process that sends as that node (the driver asks
	// its transport, transport.Reacher). A Join that would put an entry
	// into the epoch waits until it does (H28): a node whose address does
	// not reach it would otherwise be agreed in by the Join it sends over
	// its own working connections, and every key the ring gives it would
	// answer nobody. Nil: every address reaches its node, as on the
	// simulator's network and the in-memory transport, which deliver by
	// node ID.
	Reaches func(m msg.Member) bool
}

// HolderShards is how many shards the holder machine splits its keys into
// unless Config.Holder.Shards says otherwise: the driver runs the repeat
// lock of keys in different shards on different cores (delegation.Config.
// Shards). Sixteen keeps a step that holds every shard's lock cheap while
// two cores rarely meet on one shard.
const HolderShards = 16

// Outgoing is one message to send, with its resolved destination.
type Outgoing struct {
	To  msg.Member
	Env msg.Envelope
}

// Ready is what the driver must do after one input, in order: sync the
// durable writes, then send Msgs, then deliver Events. Msgs is good until the
// node's next input: a driver hands the messages to its transport (which
// copies them) before it delivers the events, which may step the node again.
type Ready struct {
	Acceptor   []epoch.AcceptorRecord
	Learned    *epoch.Learned
	GatePassed []uint64
	Msgs       []Outgoing
	Events     []delegation.Event
	// Undeliverable counts messages dropped for want of an address.
	Undeliverable int
	// GossipJoin are gossip addresses the driver should join (memberlist
	// Join), off its lock: epoch members that do not look alive, or seeds.
	GossipJoin []string
	// SaveGossip, when set, is the epoch members' gossip addresses to keep
	// for the next start (advisory: a lost write costs only seeds).
	SaveGossip map[msg.NodeID]string
	// ProposedRemove are the members this step proposed an epoch without
	// (failure detection), for the driver's log.
	ProposedRemove []msg.Member
	// Duplicate: a member refused this node's join because a live node
	// with another store has its ID (Node.Duplicate says more). The driver
	// stops the node.
	Duplicate bool
}

// HasWrites reports whether Ready carries durable writes.
func (r *Ready) HasWrites() bool {
	return len(r.Acceptor) > 0 || r.Learned != nil || len(r.GatePassed) > 0
}

// Node is one node's pure protocol state.
type Node struct {
	cfg    Config
	ep     *epoch.Machine
	home   *home.Machine
	holder *delegation.Machine

	// minInc is, per member (node ID and store), the lowest incarnation we
	// still listen to: raised when that member reclaims from us. Per store,
	// not per node ID: a wiped directory rejoining under its node ID counts
	// its incarnations from 1 again, and must not be shut out by its old
	// store's.
	minInc map[msg.Member]uint64
	// book resolves node IDs to addresses: every epoch's members and every
	// sender we heard from.
	book map[msg.NodeID]msg.Member
	// heardInc is, per member (node ID and store), the highest incarnation
	// whose sender address the book took: an older process's message,
	// delayed past a restart at another address, must not send the book
	// back to where nothing answers.
	heardInc map[msg.Member]uint64
	// nudged rate-limits Learn and EpochQuery per peer.
	nudged map[msg.NodeID]time.Time
	// curNumber and curDigest cache the learned epoch's header values.
	curNumber, curDigest uint64
	// lastWall and lastLease are ObserveClocks's last readings: the wall
	// clock's after the lease clock's.
	lastWall, lastLease time.Time
	// lag remembers the readings of the look-back window (ObserveClocks).
	lag clockLag

	mem members

	rd Ready
	// kept keeps rd.Msgs's array from step to step (flush).
	kept  outbuf.Kept
	local []msg.Envelope
	// spare is flush's second buffer for local (empty between steps).
	spare []msg.Envelope
}

// New restores a node from its durable epoch state; marker says whether the
// restored epoch's gate-passed marker was persisted.
func New(cfg Config, now time.Time, st epoch.State, marker bool) *Node {
	cfg.Epoch.Self, cfg.Home.Self, cfg.Holder.Self = cfg.Self, cfg.Self, cfg.Self
	cfg.Home.Inc, cfg.Holder.Inc = cfg.Inc, cfg.Inc
	if cfg.Holder.Shards == 0 {
		cfg.Holder.Shards = HolderShards
	}
	n := &Node{
		cfg:      cfg,
		ep:       epoch.New(cfg.Epoch, st),
		home:     home.New(cfg.Home, now, st.Learned, marker),
		holder:   delegation.New(cfg.Holder),
		minInc:   make(map[msg.Member]uint64),
		book:     make(map[msg.NodeID]msg.Member),
		heardInc: make(map[msg.Member]uint64),
		nudged:   make(map[msg.NodeID]time.Time),
	}
	n.mem.init(cfg.Members)
	if st.Learned != nil {
		n.curNumber, n.curDigest = st.Learned.Epoch.Number, st.Learned.Epoch.Digest()
		n.noteEpochs(*st.Learned)
		n.holder.OnEpoch(now, st.Learned.Epoch)
		n.onLearned()
	}
	return n
}

// noteEpochs puts the members of a learned epoch in the book, and those of
// the epoch before it that it no longer has (a member that left is still
// asked to drain). The learned epoch's entry wins over the older one, and
// gossip's over both (bookFromGossip): a member that rejoined at another
// address is reached there, the Learn of that very epoch included.
func (n *Node) noteEpochs(l epoch.Learned) {
	n.noteEpoch(l.Cert.Prev)
	n.noteEpoch(l.Epoch)
	n.bookFromGossip()
}

func (n *Node) noteEpoch(e msg.Epoch) {
	for _, m := range e.Members {
		if m.Addr != "" || n.book[m.ID].Addr == "" {
			n.book[m.ID] = m
		}
	}
}

// Self is this node.
func (n *Node) Self() msg.Member { return n.cfg.Self }

// Inc is this node's incarnation.
func (n *Node) Inc() uint64 { return n.cfg.Inc }

// Bootstrap installs the initial members as epoch 0 and starts agreeing on
// epoch 1 (the cluster's very first start only).
func (n *Node) Bootstrap(now time.Time, initial []msg.Member) Ready {
	for _, m := range initial {
		n.book[m.ID] = m
	}
	n.absorbEpoch(now, n.ep.Bootstrap(now, initial))
	return n.flush(now)
}

// Join asks seed, a member, to add this node to the epoch.
func (n *Node) Join(now time.Time, seed msg.Member) Ready {
	n.book[seed.ID] = seed
	n.push(msg.Envelope{To: seed.ID, Body: msg.Join{Member: n.cfg.Self}})
	return n.flush(now)
}

// Leave asks the members to propose an epoch without this node (and stops
// this node asking to join). Maintain asks again until such an epoch is
// learned, or WantJoin takes the Leave back. guarded (Close's handoff): no
// ask goes out while HandOffBlocker has a reason.
func (n *Node) Leave(now time.Time, guarded bool) Ready {
	n.Leaving()
	n.mem.guarded = guarded
	n.sendLeave(now)
	return n.flush(now)
}

// ProposeRemove proposes an epoch without member (agreed down).
func (n *Node) ProposeRemove(now time.Time, member msg.Member) Ready {
	n.absorbEpoch(now, n.ep.ProposeRemove(now, member))
	return n.flush(now)
}

// Current is the learned epoch, if any.
func (n *Node) Current() (epoch.Learned, bool) {
	l, _, ok := n.ep.Current()
	return l, ok
}

// LearnedAt is when the current epoch was learned (the now of the step that
// learned it); the zero time for an epoch restored at start or none.
func (n *Node) LearnedAt() time.Time {
	_, at, _ := n.ep.Current()
	return at
}

// NeedsJoin reports whether this node must (still) ask to join: it knows no
// epoch yet and is not bootstrapping one, or it is not in its epoch as it is
// now — removed, or restarted with another address or protocol version (a
// rolling upgrade). A join request dies with the member that received it, so
// drivers ask again while this holds.
func (n *Node) NeedsJoin() bool {
	l, _, ok := n.ep.Current()
	if !ok {
		return true
	}
	if l.Epoch.Number == 0 {
		return false // bootstrapping: epoch 1 comes from the initial members
	}
	got, in := l.Epoch.Member(n.cfg.Self.ID)
	return !in || got != n.cfg.Self
}

// Mixed says why cluster locks are unavailable on this node ("" if they are).
func (n *Node) Mixed() string { return n.holder.Mixed() }

// LiveUntil is this node's epoch liveness.
func (n *Node) LiveUntil() time.Time { return n.ep.LiveUntil() }

// Tick runs every machine's due work.
func (n *Node) Tick(now time.Time) Ready {
	n.absorbEpoch(now, n.ep.Tick(now))
	n.home.SetLiveness(now, n.ep.LiveUntil())
	n.home.Tick(now)
	n.holder.Tick(now)
	return n.flush(now)
}

// NextDeadline is the earliest time Tick has work; zero when none.
func (n *Node) NextDeadline() time.Time {
	d := n.ep.NextDeadline()
	for _, t := range []time.Time{n.home.NextDeadline(), n.holder.NextDeadline()} {
		if !t.IsZero() && (d.IsZero() || t.Before(d)) {
			d = t
		}
	}
	return d
}

// ObserveClocks takes one reading of the lease clock (now) between two of
// the wall clock, and judges whether the lease clock missed time (a suspend
// it did not count, H9): wall time ran ahead of it by more than JumpAfter
// since any reading as old as an anchor still in use (clockLag). If
// so the node drops the delegations it holds and its liveness at once; its
// home table and gates stay, since a stalled clock only makes them longer.
// ahead is how far wall time ran ahead when that happened, zero otherwise.
//
// The two clocks cannot be read at one instant, so the readings bracket the
// lease clock's: the wall before this lease reading, against the wall after
// the last one. Measured wall progress then never exceeds the true one, so
// a driver descheduled between reads (a loaded machine) cannot pass for a
// jump; a real jump still shows. The driver calls it before every step it
// takes under its locks, and at least as often as it ticks.
func (n *Node) ObserveClocks(wallBefore, now, wallAfter time.Time) (r Ready, ahead time.Duration) {
	lastWall, lastLease := n.lastWall, n.lastLease
	n.lastWall, n.lastLease = wallAfter, now
	window := max(n.cfg.Epoch.EpochLease, n.cfg.Home.MaxLease)
	if lastWall.IsZero() {
		n.lag.reset(now, wallAfter, window)
		n.lag.add(wallBefore, now, wallAfter)
		return Ready{}, 0
	}
	if n.cfg.Holder.Mutations.ForgetsClockLag() {
		ahead = wallBefore.Sub(lastWall) - now.Sub(lastLease)
	} else {
		ahead = n.lag.add(wallBefore, now, wallAfter)
	}
	if ahead <= JumpAfter(n.cfg.Home.Skew, n.cfg.Epoch.MaxDrift) || n.cfg.Holder.Mutations.MissesClockJump() {
		return Ready{}, 0
	}
	n.lag.reset(now, wallAfter, window)
	n.lag.add(wallBefore, now, wallAfter)
	n.ep.ClockJump()
	n.home.SetLiveness(now, time.Time{})
	n.holder.ClockJump(now)
	return n.flush(now), ahead
}

// JumpAfter is how far the lease clock may lag the wall clock, since an
// anchor still in use, before a node takes a clock jump (H9). A lag under it
// goes unseen, so every bound that Skew covers must also cover it: a
// holder's delegation ends that much late, and its home's record ends Skew
// after the lease on a clock that may run MaxDrift fast; a home's liveness
// ends that much late, and the new home's gate waits Skew past EpochLease.
// Because a home's record of a delegation ends within its liveness (home
// D3), a lagging home and its lagging holder never stack two lags against
// that gate: Skew less the drift covers each.
func JumpAfter(skew time.Duration, maxDrift float64) time.Duration {
	return time.Duration(float64(skew) * (1 - maxDrift))
}

// TryAdmitAt is the zero-message fast path (delegation.Machine.TryAdmitAt)
// for key, whose holder shard is shard: the driver holds only that shard's
// lock around it.
func (n *Node) TryAdmitAt(shard int, now deadline.Instant, key string, locker uint64, lease time.Duration, a *delegation.Admission) bool {
	return n.holder.TryAdmitAt(shard, now, key, locker, lease, a)
}

// Lock queues locker for key; an event answers it.
func (n *Node) Lock(now time.Time, key string, locker uint64, deadline time.Time, lease, silentFor time.Duration) Ready {
	n.holder.Lock(now, key, locker, deadline, lease, silentFor)
	return n.flush(now)
}

// Unlock ends locker's critical section. It returns false (and no Ready) when
// the fast path sufficed.
func (n *Node) Unlock(now time.Time, key string, locker uint64) (Ready, bool) {
	if n.holder.Unlock(now, key, locker) {
		return Ready{}, false
	}
	return n.flush(now), true
}

// TryUnlockIn is the clock-free fast path of Unlock (see delegation) for
// key, whose holder shard is shard, under that shard's lock alone.
func (n *Node) TryUnlockIn(shard int, key string, locker uint64) bool {
	return n.holder.TryUnlockIn(shard, key, locker)
}

// Cancel withdraws a queued locker.
func (n *Node) Cancel(now time.Time, key string, locker uint64) Ready {
	n.holder.Cancel(now, key, locker)
	return n.flush(now)
}

// Settled reports the store's barrier hook for (key, token).
func (n *Node) Settled(now time.Time, key string, tok fence.Token, barrier []byte, err error) Ready {
	n.holder.Settled(now, key, tok, barrier, err)
	return n.flush(now)
}

// Fresh reports the store's wait hook for (key, token).
func (n *Node) Fresh(now time.Time, key string, tok fence.Token, err error) Ready {
	n.holder.Fresh(now, key, tok, err)
	return n.flush(now)
}

// Stats are the home's and the holder's counters.
func (n *Node) Stats() (home.Stats, delegation.Stats) { return n.home.Stats(), n.holder.Stats() }

// Home and Holder expose the machines to checkers (read-only use).
func (n *Node) Home() *home.Machine          { return n.home }
func (n *Node) Holder() *delegation.Machine  { return n.holder }
func (n *Node) EpochMachine() *epoch.Machine { return n.ep }
func (n *Node) Book(id msg.NodeID) (msg.Member, bool) {
	m, ok := n.book[id]
	return m, ok
}
