package transport

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/homelock/homelock/msg"
)

// Timings are memberlist's failure detector settings.
type Timings struct {
	ProbeInterval    time.Duration
	ProbeTimeout     time.Duration
	GossipInterval   time.Duration
	PushPullInterval time.Duration
	TCPTimeout       time.Duration
	// SuspicionMult scales how long a suspect stays suspect before it is
	// declared dead (memberlist multiplies it by log10 of the cluster size
	// and ProbeInterval).
	SuspicionMult   int
	GossipToTheDead time.Duration
}

// LocalTimings are memberlist's DefaultLocalConfig timings, for a LAN.
func LocalTimings() Timings {
	c := memberlist.DefaultLocalConfig()
	return Timings{
		ProbeInterval: c.ProbeInterval, ProbeTimeout: c.ProbeTimeout,
		GossipInterval: c.GossipInterval, PushPullInterval: c.PushPullInterval,
		TCPTimeout: c.TCPTimeout, SuspicionMult: c.SuspicionMult, GossipToTheDead: c.GossipToTheDeadTime,
	}
}

// FastTimings are LocalTimings scaled down tenfold, for tests on loopback: a
// stopped node is declared dead within about a second.
func FastTimings() Timings {
	return Timings{
		ProbeInterval: 100 * time.Millisecond, ProbeTimeout: 50 * time.Millisecond,
		GossipInterval: 20 * time.Millisecond, PushPullInterval: 2 * time.Second,
		TCPTimeout: 500 * time.Millisecond, SuspicionMult: 3, GossipToTheDead: 2 * time.Second,
	}
}

// MembershipConfig configures NewMembership.
type MembershipConfig struct {
	// Meta is what this node advertises; Meta.NodeID is its memberlist name.
	Meta Meta
	// BindAddr and BindPort are where memberlist listens (UDP and TCP);
	// port 0 picks a free one (see Membership.Addr).
	BindAddr string
	BindPort int
	// AdvertiseAddr and AdvertisePort are what peers dial, if not the bind
	// address (NAT, containers).
	AdvertiseAddr string
	AdvertisePort int
	// Seeds are host:port of members to join at start; none starts a new
	// gossip cluster (which nodes are members of an epoch is agreed
	// separately, never by memberlist).
	Seeds []string
	// SecretKey, 16, 24 or 32 bytes, encrypts gossip with AES-GCM; nodes
	// with another key cannot join.
	SecretKey []byte
	// AcceptKeys are further keys that gossip from other nodes may be
	// encrypted with (a key change under way); this node encrypts with
	// SecretKey only. They need SecretKey.
	AcceptKeys [][]byte
	// Plaintext says what a node with SecretKey does with unencrypted
	// gossip; anything but PlaintextRefused needs SecretKey.
	Plaintext Plaintext
	// Timings defaults to LocalTimings.
	Timings Timings
	// DeadRetention is how long a dead member stays in Members (so a caller
	// can measure how long it has been down). Default one hour.
	DeadRetention time.Duration
	// OnEvent receives membership events, one at a time and in order, from
	// a goroutine of the Membership; it may call Members. Nil drops events.
	OnEvent func(MemberEvent)
	// Logger receives memberlist's log, mapped to slog levels; nil discards.
	// It is used as given: the caller names the component and node.
	Logger *slog.Logger
}

// PeerState is a member's liveness as this node sees it.
type PeerState uint8

const (
	PeerAlive PeerState = iota + 1
	// PeerSuspect: this node's own probes failed and memberlist is waiting
	// for the suspicion to be confirmed or refuted. (memberlist reports no
	// suspicion that arrives by gossip; such a member reads as alive until
	// it is declared dead.)
	PeerSuspect
	// PeerDead: failed, left gracefully, or replaced by a member with the
	// same node ID and another store ID. memberlist reports a graceful leave
	// and a failure alike.
	PeerDead
)

func (s PeerState) String() string {
	switch s {
	case PeerAlive:
		return "alive"
	case PeerSuspect:
		return "suspect"
	case PeerDead:
		return "dead"
	}
	return "unknown"
}

// Peer is one member as this node sees it. Members are keyed by (NodeID,
// StoreID): a node that comes back with a new store is a new Peer, and the
// old one stays as dead (H21).
type Peer struct {
	Meta Meta
	// Addr is the peer's memberlist address (host:port).
	Addr  string
	State PeerState
	// Since is when this node saw the peer enter State.
	Since time.Time
	// Local marks this node itself.
	Local bool
}

// EventType names a membership change.
type EventType uint8

const (
	// EventJoin: a member appeared, or came back alive after being dead.
	EventJoin EventType = iota + 1
	// EventUpdate: an alive member changed its Meta (not its StoreID,
	// which is EventDown of the old member then EventJoin of the new).
	EventUpdate
	// EventSuspect: this node's probes of the member failed.
	EventSuspect
	// EventAlive: a suspect member answered a probe again.
	EventAlive
	// EventDown: the member is dead (failed, left, or replaced).
	EventDown
)

func (t EventType) String() string {
	switch t {
	case EventJoin:
		return "join"
	case EventUpdate:
		return "update"
	case EventSuspect:
		return "suspect"
	case EventAlive:
		return "alive"
	case EventDown:
		return "down"
	}
	return "unknown"
}

// MemberEvent is one change; Peer is the member's state after it (for
// EventDown, Peer.Since is when it was first seen down).
type MemberEvent struct {
	Type EventType
	Peer Peer
	// Replaced is set on the EventDown of a member whose node ID came back
	// with another store ID: its durable state is gone, whatever memberlist
	// says about the node (H21).
	Replaced bool
}

// Membership is failure detection and metadata over memberlist.
type Membership struct {
	cfg   MembershipConfig
	log   *slog.Logger
	ml    *memberlist.Memberlist
	local Meta

	mu      sync.Mutex
	peers   map[memberKey]*Peer
	current map[msg.NodeID]memberKey // each node ID's latest store
	pending []MemberEvent
	wake    chan struct{}
	// closed is set by Close before memberlist is shut down; its logger
	// reads it too, since the sends memberlist's goroutines still make
	// then fail on closed sockets.
	closed atomic.Bool

	done     chan struct{}
	dispatch sync.WaitGroup
}

type memberKey struct {
	id    msg.NodeID
	store uint64
}

// NewMembership starts memberlist and joins cfg.Seeds. If seeds are given and
// none can be contacted it stops and returns ErrJoin.
func NewMembership(cfg MembershipConfig) (*Membership, error) {
	metaBytes, err := EncodeMeta(cfg.Meta)
	if err != nil {
		return nil, err
	}
	if cfg.Timings == (Timings{}) {
		cfg.Timings = LocalTimings()
	}
	if cfg.DeadRetention <= 0 {
		cfg.DeadRetention = time.Hour
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.BindAddr == "" {
		return nil, fmt.Errorf("%w: BindAddr is empty", ErrBadConfig)
	}
	m := &Membership{
		cfg:     cfg,
		log:     cfg.Logger,
		local:   cfg.Meta,
		peers:   make(map[memberKey]*Peer),
		current: make(map[msg.NodeID]memberKey),
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
	}

	mc := memberlist.DefaultLocalConfig()
	mc.Name = string(cfg.Meta.NodeID)
	mc.BindAddr, mc.BindPort = cfg.BindAddr, cfg.BindPort
	mc.AdvertiseAddr, mc.AdvertisePort = cfg.AdvertiseAddr, cfg.AdvertisePort
	if mc.AdvertisePort == 0 {
		// memberlist would advertise its default port, not the bound one.
		mc.AdvertisePort = cfg.BindPort
	}
	t := cfg.Timings
	mc.ProbeInterval, mc.ProbeTimeout = t.ProbeInterval, t.ProbeTimeout
	mc.GossipInterval, mc.PushPullInterval = t.GossipInterval, t.PushPullInterval
	mc.TCPTimeout, mc.SuspicionMult, mc.GossipToTheDeadTime = t.TCPTimeout, t.SuspicionMult, t.GossipToTheDead
	// A restarted node may come back on another port; once memberlist
	// calls the old address dead, let the name move.
	mc.DeadNodeReclaimTime = t.ProbeInterval
	// memberlist's LAN multiplier: with DefaultLocalConfig's 2, the node
	// that learns of a joiner tells only two others of a 4-node cluster,
	// and the third waited for a push/pull (3 of 90 joins tried on
	// loopback; none of 180 with 4).
	mc.RetransmitMult = 4
	if len(cfg.SecretKey) > 0 {
		if mc.Keyring, err = memberlist.NewKeyring(cfg.AcceptKeys, cfg.SecretKey); err != nil {
			return nil, fmt.Errorf("%w: gossip keys: %v", ErrBadConfig, err)
		}
	} else if len(cfg.AcceptKeys) > 0 {
		return nil, fmt.Errorf("%w: AcceptKeys without SecretKey", ErrBadConfig)
	}
	switch {
	case cfg.Plaintext > PlaintextSent:
		return nil, fmt.Errorf("%w: Plaintext %d", ErrBadConfig, cfg.Plaintext)
	case cfg.Plaintext != PlaintextRefused && len(cfg.SecretKey) == 0:
		return nil, fmt.Errorf("%w: Plaintext %s without SecretKey", ErrBadConfig, cfg.Plaintext)
	}
	mc.GossipVerifyIncoming = cfg.Plaintext == PlaintextRefused
	mc.GossipVerifyOutgoing = cfg.Plaintext != PlaintextSent
	mc.Logger = newMemberlistLogger(m.log, m.suspected, m.closed.Load)
	d := &mlDelegate{m: m, meta: metaBytes}
	mc.Delegate, mc.Events, mc.Alive, mc.Ping, mc.Conflict = d, d, d, d, d

	m.dispatch.Add(1)
	go m.dispatchLoop()
	ml, err := memberlist.Create(mc)
	if err != nil {
		m.stopDispatch()
		return nil, fmt.Errorf("transport: memberlist: %w", err)
	}
	m.ml = ml
	if len(cfg.Seeds) > 0 {
		if _, err := m.Join(cfg.Seeds); err != nil {
			ml.Shutdown()
			m.stopDispatch()
			return nil, err
		}
	}
	return m, nil
}

// Addr is the memberlist address this node advertises (host:port), for
// other nodes' Seeds.
func (m *Membership) Addr() string {
	n := m.ml.LocalNode()
	return net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
}

// Join contacts seeds (host:port) and returns how many answered.
func (m *Membership) Join(seeds []string) (int, error) {
	if m.isClosed() {
		return 0, ErrClosed
	}
	n, err := m.ml.Join(seeds)
	if n == 0 {
		return 0, fmt.Errorf("%w: no seed of %v answered: %v", ErrJoin, seeds, err)
	}
	return n, nil
}

// Members returns every member this node knows, itself included, dead ones
// for DeadRetention, sorted by node ID then store ID.
func (m *Membership) Members() []Peer {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Peer, 0, len(m.peers))
	for _, p := range m.peers {
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b Peer) int {
		return cmp.Or(cmp.Compare(a.Meta.NodeID, b.Meta.NodeID), cmp.Compare(a.Meta.StoreID, b.Meta.StoreID))
	})
	return out
}

// Leave tells the cluster this node is leaving and waits, until ctx is done,
// for the message to spread. Call Close afterwards.
func (m *Membership) Leave(ctx context.Context) error {
	if m.isClosed() {
		return ErrClosed
	}
	timeout := 5 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	if err := m.ml.Leave(timeout); err != nil {
		return fmt.Errorf("transport: leave: %w", err)
	}
	return ctx.Err()
}

// Close stops memberlist (without leaving: peers will find this node dead)
// and the event goroutine. Events not yet delivered are dropped.
func (m *Membership) Close() error {
	if !m.closed.CompareAndSwap(false, true) {
		return nil
	}
	err := m.ml.Shutdown()
	m.stopDispatch()
	if err != nil {
		return fmt.Errorf("transport: memberlist shutdown: %w", err)
	}
	return nil
}

func (m *Membership) isClosed() bool { return m.closed.Load() }

func (m *Membership) stopDispatch() {
	close(m.done)
	m.dispatch.Wait()
}

// dispatchLoop calls OnEvent outside memberlist's locks: its delegates run
// under them, so they only append to pending.
func (m *Membership) dispatchLoop() {
	defer m.dispatch.Done()
	for {
		select {
		case <-m.wake:
		case <-m.done:
			return
		}
		for {
			m.mu.Lock()
			evs := m.pending
			m.pending = nil
			m.mu.Unlock()
			if len(evs) == 0 {
				break
			}
			for _, ev := range evs {
				select {
				case <-m.done:
					return
				default:
				}
				m.cfg.OnEvent(ev)
			}
		}
	}
}

// emit queues ev; m.mu is held.
func (m *Membership) emit(ev MemberEvent) {
	m.log.Debug("transport: membership event", "event", ev.Type.String(), "member", string(ev.Peer.Meta.NodeID), "store", msg.FormatStore(ev.Peer.Meta.StoreID), "replaced", ev.Replaced)
	if m.cfg.OnEvent == nil {
		return
	}
	m.pending = append(m.pending, ev)
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// alive records a join or update of n (memberlist's NotifyJoin, NotifyUpdate).
func (m *Membership) alive(n *memberlist.Node) {
	meta, err := DecodeMeta(n.Meta)
	if err != nil {
		// NotifyAlive refuses such nodes, so this is a node we refused.
		return
	}
	now := time.Now()
	key := memberKey{meta.NodeID, meta.StoreID}
	addr := net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
	m.mu.Lock()
	defer m.mu.Unlock()
	m.prune(now)
	if old, ok := m.current[meta.NodeID]; ok && old != key {
		// H21: same node ID, other store. memberlist sees one node that
		// refuted its death with new metadata; the protocol must see the
		// old member down, or it would never be agreed down.
		if p := m.peers[old]; p != nil && p.State != PeerDead {
			p.State, p.Since = PeerDead, now
			m.emit(MemberEvent{Type: EventDown, Peer: *p, Replaced: true})
		}
	}
	m.current[meta.NodeID] = key
	p := m.peers[key]
	switch {
	case p == nil || p.State == PeerDead:
		p = &Peer{Meta: meta, Addr: addr, State: PeerAlive, Since: now, Local: meta.NodeID == m.local.NodeID}
		m.peers[key] = p
		m.emit(MemberEvent{Type: EventJoin, Peer: *p})
	case p.Meta != meta || p.Addr != addr:
		p.Meta, p.Addr = meta, addr
		if p.State == PeerSuspect {
			p.State, p.Since = PeerAlive, now
		}
		m.emit(MemberEvent{Type: EventUpdate, Peer: *p})
	}
}

// dead records memberlist's NotifyLeave.
func (m *Membership) dead(n *memberlist.Node) {
	meta, err := DecodeMeta(n.Meta)
	if err != nil {
		return
	}
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if p := m.peers[memberKey{meta.NodeID, meta.StoreID}]; p != nil && p.State != PeerDead {
		p.State, p.Since = PeerDead, now
		m.emit(MemberEvent{Type: EventDown, Peer: *p})
	}
}

// suspected is fed by the log bridge when this node's probe of name failed.
func (m *Membership) suspected(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key, ok := m.current[msg.NodeID(name)]
	if !ok {
		return
	}
	if p := m.peers[key]; p != nil && p.State == PeerAlive {
		p.State, p.Since = PeerSuspect, time.Now()
		m.emit(MemberEvent{Type: EventSuspect, Peer: *p})
	}
}

// acked is memberlist's NotifyPingComplete: a direct probe was answered.
func (m *Membership) acked(n *memberlist.Node) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key, ok := m.current[msg.NodeID(n.Name)]
	if !ok {
		return
	}
	if p := m.peers[key]; p != nil && p.State == PeerSuspect {
		p.State, p.Since = PeerAlive, time.Now()
		m.emit(MemberEvent{Type: EventAlive, Peer: *p})
	}
}

// prune forgets members dead for longer than DeadRetention; m.mu is held.
func (m *Membership) prune(now time.Time) {
	for k, p := range m.peers {
		if p.State == PeerDead && now.Sub(p.Since) > m.cfg.DeadRetention {
			delete(m.peers, k)
			if m.current[k.id] == k {
				delete(m.current, k.id)
			}
		}
	}
}

// mlDelegate implements memberlist's delegate interfaces. Its methods run
// under memberlist's locks: they must not block or call into memberlist.
type mlDelegate struct {
	m    *Membership
	meta []byte
}

func (d *mlDelegate) NodeMeta(limit int) []byte {
	if len(d.meta) > limit {
		// EncodeMeta already bounded it by MetaMaxSize; memberlist never
		// passes less.
		return nil
	}
	return d.meta
}

func (d *mlDelegate) NotifyMsg([]byte)                           {}
func (d *mlDelegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d *mlDelegate) LocalState(join bool) []byte                { return nil }
func (d *mlDelegate) MergeRemoteState(buf []byte, join bool)     {}

func (d *mlDelegate) NotifyJoin(n *memberlist.Node)   { d.m.alive(n) }
func (d *mlDelegate) NotifyUpdate(n *memberlist.Node) { d.m.alive(n) }
func (d *mlDelegate) NotifyLeave(n *memberlist.Node)  { d.m.dead(n) }

var errForeignMeta = errors.New("not a homelock node")

// NotifyAlive keeps out nodes whose metadata is not a homelock Meta for
// their own name: every member must be addressable and versioned.
func (d *mlDelegate) NotifyAlive(n *memberlist.Node) error {
	meta, err := DecodeMeta(n.Meta)
	if err != nil {
		return fmt.Errorf("%w: %v", errForeignMeta, err)
	}
	if string(meta.NodeID) != n.Name {
		return fmt.Errorf("%w: meta names %q", errForeignMeta, meta.NodeID)
	}
	return nil
}

func (d *mlDelegate) AckPayload() []byte { return nil }
func (d *mlDelegate) NotifyPingComplete(n *memberlist.Node, rtt time.Duration, payload []byte) {
	d.m.acked(n)
}

func (d *mlDelegate) NotifyConflict(existing, other *memberlist.Node) {
	d.m.log.Warn("transport: two nodes claim one node ID", "id", existing.Name,
		"existing", existing.Address(), "other", other.Address())
}
