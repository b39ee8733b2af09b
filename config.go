package homelock

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/msg"
	"github.com/homelock/homelock/transport"
)

// ProtocolVersion is the lock protocol version this build speaks. Members
// advertise it (memberlist metadata and the epoch's Caps); versions match
// exactly or not at all, and a cluster-scope Lock fails closed with
// ErrLockUnavailable while the epoch's members disagree.
//
// v2: Acquire.Queued (docs/design.md, "The hot-key handoff"), a field a v1
// decoder refuses.
const ProtocolVersion uint32 = 3

// skewMargin is what Validate adds to the drift term of the Skew bound: room
// for scheduling and the time between reading a clock and acting on it.
const skewMargin = 5 * time.Millisecond

// Config configures a Node. Start from DefaultConfig, set the identity and
// addresses, and let Open validate it.
type Config struct {
	// NodeID names this node, stable across restarts; it is the Owner of the
	// grants this node holds. Required.
	NodeID string

	// ClusterID names the lock domain: tokens are ordered within one domain
	// only, and a data directory created for one domain refuses to open for
	// another. It is the Domain of every signed grant. Required.
	ClusterID string

	// DataDir is where the node's Pebble store lives (identity, incarnation,
	// acceptor records, learned epoch, gate markers, and the fence Guard's
	// records of the embedding store). Required.
	DataDir string

	// FS is the file system DataDir lives on; nil is the OS. Tests pass a
	// Pebble in-memory FS.
	FS vfs.FS

	// GRPCAddr is the host:port the node's gRPC transport listens on (":0"
	// picks a port). AdvertiseAddr is what peers dial if not the listen
	// address (it must be set when GRPCAddr binds a wildcard address).
	GRPCAddr      string
	AdvertiseAddr string

	// TLS, when set, turns on TLS for the gRPC transport (mutual when it
	// names client certificates).
	TLS *transport.TLSFiles

	// GossipAddr is the host:port memberlist binds (UDP and TCP; port 0 picks
	// one). GossipAdvertise is what peers dial if not the bind address.
	// Memberlist detects failures and carries each node's store ID, gRPC
	// address and protocol version; it never decides membership.
	GossipAddr      string
	GossipAdvertise string

	// GossipKey, 16, 24 or 32 bytes, encrypts gossip (AES-GCM).
	GossipKey []byte
	// GossipAcceptKeys are further keys that other nodes' gossip may be
	// encrypted with, for changing GossipKey without splitting the cluster
	// (docs/operations.md, "Changing the gossip key"); this node encrypts
	// with GossipKey only.
	GossipAcceptKeys [][]byte
	// GossipPlaintext is what this node does with unencrypted gossip, for
	// turning encryption on or off across a running cluster
	// (docs/operations.md, "Turning gossip encryption on or off"); the
	// zero value refuses it. Other values need GossipKey.
	GossipPlaintext transport.Plaintext

	// GossipTimings tunes failure detection; the zero value is memberlist's
	// LAN defaults (transport.LocalTimings). Its PushPullInterval is held
	// to at most DownAfter/2: gossip can miss telling a member about a new
	// one, and push/pull is what repairs that; repaired only after DownAfter,
	// the member would count the new one down and remove it.
	GossipTimings transport.Timings

	// Bootstrap starts a brand-new cluster whose first epoch is exactly
	// InitialMembers (node IDs, this node among them). Every initial member
	// must be given the same list; Open waits until memberlist shows all of
	// them. It is ignored by a node whose store already learned an epoch.
	Bootstrap      bool
	InitialMembers []string

	// Join lists gossip addresses (host:port) of running nodes. A new node
	// joins the cluster through them; bootstrapping nodes use them to find
	// each other (give every initial member the others' addresses). A
	// restarted node needs none: it rejoins gossip at the addresses of its
	// epoch's members that it kept from its last run, and the members that
	// stayed up keep rejoining it; Join is tried too while no member looks
	// alive.
	Join []string

	// Started, if set, is called once from Open as soon as the node answers
	// Status (before Open waits for bootstrap or join), so that a process can
	// serve its status while it starts. Lock fails with ErrLockUnavailable
	// until the node is a member; if Open then fails, the node is closed.
	Started func(*Node)

	// KeyRing signs the lockGrant.v1 that a home sends with every delegation
	// (Handle.Grant), for fence.Guard to verify. KeyRingFile loads one
	// instead. With neither, grants are not signed and Handle.Grant is nil.
	KeyRing     *fence.KeyRing
	KeyRingFile string

	// GrantOperation is the Operation bound into signed grants; a Guard
	// accepts a mutation only with the same operation.
	GrantOperation string

	// EpochLease is how long one renewal round by a majority gives a home the
	// right to grant under the current epoch, and the length of the activation
	// and restart gates (EpochLease + Skew). It must exceed MaxLease + Skew, so
	// that every delegation of an old epoch ends within one gate.
	EpochLease time.Duration

	// MaxLease caps each grant or renewal of a delegation's lease: how long
	// a silent holder can keep others waiting. A live holder renews while
	// its critical section runs, so a section may last longer (WithLease
	// bounds it).
	MaxLease time.Duration

	// MinUseful is the shortest lease worth using: a grant arriving with less
	// left is given back, and no critical section starts with less left.
	// MaxLease must exceed 2 × MinUseful (an idle delegation is released
	// 2 × MinUseful before it lapses).
	MinUseful time.Duration

	// Skew is added wherever one node's expiry must follow another's: homes
	// keep a delegation Skew longer than its holder. Validate requires at
	// least 2 × MaxDrift × max(EpochLease, MaxLease) plus a margin. If wall
	// time ever outruns the lease clock by more than Skew × (1 − MaxDrift),
	// added up over the last EpochLease, the node drops every delegation it
	// holds (a clock jump).
	Skew time.Duration

	// MaxDrift bounds the clock rate drift between nodes (0.01 = 1%); holders
	// shorten their leases by it.
	MaxDrift float64

	// RetryInterval is how often an unanswered Acquire, Renew, renewal round
	// or Join is resent. It paces recovery, never safety.
	RetryInterval time.Duration

	// DownAfter is how long memberlist must report a member down, while this
	// node sees a majority of the epoch alive, before this node proposes an
	// epoch without it. A node that sees no live majority (it heard no gossip
	// yet, or sits in a minority partition) never proposes a removal. A
	// member removed by mistake just joins again.
	DownAfter time.Duration

	// DefaultWait bounds a Lock without WithWait (a context deadline that is
	// sooner wins).
	DefaultWait time.Duration

	// MaxDelegations caps the live delegations this node grants as a home,
	// MaxPerRequester those one requester may hold from it, and MaxWaiters one
	// key's queue. At a cap requests fail with ErrTooManyDelegations; nothing
	// is evicted. 0 means no cap.
	MaxDelegations  int
	MaxPerRequester int
	MaxWaiters      int

	// Barrier is the store's settle hook, run when a delegation is drained:
	// it returns once no write staged under the delegation can still commit,
	// with an opaque barrier (say, the last replicated write position for the
	// key) that the next holder waits for. It receives the barrier this node
	// inherited with the grant and must return one at least as new (barriers
	// never go backwards). This refines issue 3's Barrier(key) []byte: the
	// hook also gets a context bounded by the delegation's lease and may fail
	// (the delegation is then dropped without a Release and its home waits
	// the lease out). Nil returns the inherited barrier unchanged.
	Barrier func(ctx context.Context, key string, inherited []byte) ([]byte, error)

	// WaitFresh is the store's wait hook, run before the first critical
	// section under a delegation that came with a barrier: it returns once
	// this node's replica has caught up with it. Nil returns at once. Hooks
	// run off the driver's lock and must not lock the key being drained.
	WaitFresh func(ctx context.Context, key string, barrier []byte) error

	// Logger receives the node's log; nil discards it. Every line carries
	// node=NodeID and one component (homelock, localstore, transport,
	// memberlist): give a Logger without those keys.
	Logger *slog.Logger

	// Clock is the lease clock; nil is BootClock (CLOCK_BOOTTIME, which keeps
	// counting while the machine is suspended). Tests inject their own.
	Clock Clock

	// Transport, when set, builds the node's transport in place of gRPC, as
	// hashicorp/raft takes its Transport (tests pass the endpoints of an
	// in-memory transport.Network). Open calls it once, before anything is
	// sent, with this node's member identity (ID, store ID, advertised
	// address, protocol version) and the Handler it must deliver to; the
	// Handler only queues for the node's driver loop, so the transport may
	// call it from any goroutine. GRPCAddr and TLS are then unused, and an
	// empty AdvertiseAddr becomes "mem:" + NodeID. The node closes the
	// transport in Close.
	Transport TransportFunc

	// version, when not 0, is the protocol version this node advertises and
	// speaks in place of ProtocolVersion: the package's own tests of
	// capability negotiation set it.
	version uint32

	// mutations switch protocol rules off on a real node, for tests that
	// show their checkers catch it (SetMutations, homelock_mutations builds
	// only; empty otherwise).
	mutations mutationSwitches
}

// TransportFunc builds a node's transport from its member identity and the
// handler the transport delivers received envelopes to (Config.Transport).
type TransportFunc func(self msg.Member, h transport.Handler) (transport.Transport, error)

// DefaultConfig returns a Config with every timing and cap set; NodeID,
// ClusterID, DataDir, the addresses and Bootstrap or Join remain to be set.
func DefaultConfig() Config {
	return Config{
		GRPCAddr:       "127.0.0.1:7946",
		GossipAddr:     "127.0.0.1:7947",
		GrantOperation: "lock",
		EpochLease:     6 * time.Second,
		MaxLease:       2 * time.Second,
		MinUseful:      100 * time.Millisecond,
		Skew:           250 * time.Millisecond,
		MaxDrift:       0.01,
		RetryInterval:  100 * time.Millisecond,
		DownAfter:      10 * time.Second,
		DefaultWait:    10 * time.Second,
		MaxDelegations: 1 << 20,
		MaxWaiters:     4096,
	}
}

// Validate reports every violation, each naming the field and its value; nil
// means Open will accept the config.
func (c Config) Validate() error {
	var v []string
	bad := func(format string, args ...any) { v = append(v, fmt.Sprintf(format, args...)) }

	switch {
	case c.NodeID == "":
		bad("NodeID is empty")
	case len(c.NodeID) > fence.MaxNameLen:
		bad("NodeID (%d bytes) must be at most %d bytes", len(c.NodeID), fence.MaxNameLen)
	}
	switch {
	case c.ClusterID == "":
		bad("ClusterID is empty")
	case len(c.ClusterID) > fence.MaxNameLen:
		bad("ClusterID (%d bytes) must be at most %d bytes", len(c.ClusterID), fence.MaxNameLen)
	}
	if c.DataDir == "" {
		bad("DataDir is empty")
	}
	if c.Transport == nil {
		checkAddr(bad, "GRPCAddr", c.GRPCAddr, true)
	}
	checkAddr(bad, "AdvertiseAddr", c.AdvertiseAddr, false)
	checkAddr(bad, "GossipAddr", c.GossipAddr, true)
	checkAddr(bad, "GossipAdvertise", c.GossipAdvertise, false)
	for _, a := range c.Join {
		checkAddr(bad, "Join", a, true)
	}
	if c.Bootstrap {
		switch {
		case len(c.InitialMembers) == 0:
			bad("InitialMembers is empty but Bootstrap is set")
		case !slices.Contains(c.InitialMembers, c.NodeID):
			bad("InitialMembers (%s) must include NodeID (%q) when Bootstrap is set", strings.Join(c.InitialMembers, ","), c.NodeID)
		}
		seen := map[string]bool{}
		for _, m := range c.InitialMembers {
			if m == "" || seen[m] {
				bad("InitialMembers (%s) has an empty or repeated ID %q", strings.Join(c.InitialMembers, ","), m)
			}
			seen[m] = true
		}
	} else if len(c.InitialMembers) > 0 {
		bad("InitialMembers (%s) is set but Bootstrap is not", strings.Join(c.InitialMembers, ","))
	}
	if k := len(c.GossipKey); k != 0 && k != 16 && k != 24 && k != 32 {
		bad("GossipKey (%d bytes) must be 16, 24 or 32 bytes", k)
	}
	for i, key := range c.GossipAcceptKeys {
		if k := len(key); k != 16 && k != 24 && k != 32 {
			bad("GossipAcceptKeys[%d] (%d bytes) must be 16, 24 or 32 bytes", i, k)
		}
	}
	if len(c.GossipAcceptKeys) > 0 && len(c.GossipKey) == 0 {
		bad("GossipAcceptKeys need a GossipKey: a node without one neither encrypts nor decrypts gossip")
	}
	if c.GossipPlaintext > transport.PlaintextSent {
		bad("GossipPlaintext (%d) is not one of refuse, accept or send", c.GossipPlaintext)
	} else if c.GossipPlaintext != transport.PlaintextRefused && len(c.GossipKey) == 0 {
		bad("GossipPlaintext %s needs a GossipKey: without one, gossip is plaintext already", c.GossipPlaintext)
	}
	if c.KeyRing != nil && c.KeyRingFile != "" {
		bad("KeyRing and KeyRingFile (%q) are both set", c.KeyRingFile)
	}
	if c.GrantOperation == "" || len(c.GrantOperation) > fence.MaxNameLen {
		bad("GrantOperation (%q) must be 1 to %d bytes", c.GrantOperation, fence.MaxNameLen)
	}

	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"EpochLease", c.EpochLease}, {"MaxLease", c.MaxLease}, {"MinUseful", c.MinUseful},
		{"RetryInterval", c.RetryInterval}, {"DownAfter", c.DownAfter}, {"DefaultWait", c.DefaultWait},
	} {
		if d.v <= 0 {
			bad("%s (%v) must be positive", d.name, d.v)
		}
	}
	if c.Skew < 0 {
		bad("Skew (%v) must not be negative", c.Skew)
	}
	if c.MaxDrift < 0 || c.MaxDrift >= 0.1 {
		bad("MaxDrift (%g) must be in [0, 0.1)", c.MaxDrift)
	}
	if c.EpochLease <= c.MaxLease+c.Skew {
		bad("EpochLease (%v) must exceed MaxLease (%v) + Skew (%v)", c.EpochLease, c.MaxLease, c.Skew)
	}
	if min := minSkew(c.MaxDrift, c.EpochLease, c.MaxLease); c.Skew < min {
		bad("Skew (%v) must be at least 2 × MaxDrift (%g) × max(EpochLease, MaxLease) + margin (%v) = %v",
			c.Skew, c.MaxDrift, skewMargin, min)
	}
	if c.MaxLease > 0 && c.MaxLease <= 2*c.MinUseful {
		bad("MaxLease (%v) must exceed 2 × MinUseful (%v)", c.MaxLease, c.MinUseful)
	}
	if c.MaxLease > 0 && c.RetryInterval >= c.MaxLease {
		bad("RetryInterval (%v) must be below MaxLease (%v)", c.RetryInterval, c.MaxLease)
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"MaxDelegations", c.MaxDelegations}, {"MaxPerRequester", c.MaxPerRequester}, {"MaxWaiters", c.MaxWaiters}} {
		if n.v < 0 {
			bad("%s (%d) must not be negative", n.name, n.v)
		}
	}
	if len(v) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrInvalidConfig, strings.Join(v, "; "))
}

// minSkew is the least Skew that covers two clocks drifting apart by
// maxDrift each over the longest interval one node measures for another.
func minSkew(maxDrift float64, epochLease, maxLease time.Duration) time.Duration {
	return time.Duration(2*maxDrift*float64(max(epochLease, maxLease))) + skewMargin
}

// relayAfter is the gRPC transport's RelayAfter: a quarter of MaxLease, at
// most a second. A held section renews half a lease before its lease ends;
// when that renewal is the first write into a fresh cut, the relays must
// start and its answer come back through them within that half
// (docs/design.md, "Relays in a partial partition").
func (c Config) relayAfter() time.Duration { return min(time.Second, c.MaxLease/4) }

func checkAddr(bad func(string, ...any), field, addr string, required bool) {
	if addr == "" {
		if required {
			bad("%s is empty", field)
		}
		return
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		bad("%s (%q) is not host:port: %v", field, addr, err)
	}
}

// protocolVersion is the version this node advertises.
func (c *Config) protocolVersion() uint32 {
	if c.version != 0 {
		return c.version
	}
	return ProtocolVersion
}

// logger is Logger (or a discarding one) for one component of the node: the
// only place the node and component keys are added, so that each appears
// once per line.
func (c *Config) logger(component string) *slog.Logger {
	l := c.Logger
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	return l.With("component", component, "node", c.NodeID)
}

// gossipEncryption is Status.Gossip.
func (c Config) gossipEncryption() string {
	switch {
	case len(c.GossipKey) == 0:
		return "off"
	case c.GossipPlaintext == transport.PlaintextAccepted:
		return "on, plaintext accepted (a step of turning it on or off)"
	case c.GossipPlaintext == transport.PlaintextSent:
		return "plaintext sent, encrypted accepted (a step of turning it on or off)"
	}
	return "on"
}

// gossipTimings are the timings memberlist runs with: GossipTimings, or
// the LAN defaults, with a push/pull at least twice per DownAfter (0, which
// memberlist reads as never, included).
func (c Config) gossipTimings() transport.Timings {
	t := c.GossipTimings
	if t == (transport.Timings{}) {
		t = transport.LocalTimings()
	}
	if half := c.DownAfter / 2; t.PushPullInterval <= 0 || t.PushPullInterval > half {
		t.PushPullInterval = half
	}
	return t
}
