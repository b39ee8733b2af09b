package homelock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/homelock/homelock/delegation"
	"github.com/homelock/homelock/epoch"
	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/home"
	"github.com/homelock/homelock/internal/core"
	"github.com/homelock/homelock/localstore"
	"github.com/homelock/homelock/msg"
	"github.com/homelock/homelock/transport"
)

// Node is one member of a homelock cluster, embedded in a process of the
// replicated store. Its methods are safe for concurrent use.
type Node struct {
	cfg   Config
	log   *slog.Logger
	clock Clock
	// boot is clock when it is the default BootClock, which the repeat
	// path reads without building a time.Time.
	boot  *BootClock
	ring  *fence.KeyRing
	store *localstore.Store
	tr    transport.Transport
	ml    *transport.Membership
	self  msg.Member
	inc   uint64

	// mu serialises every step of the core (the state machines are not safe
	// for concurrent use) and the driver state below. A step holds it and
	// every shard's lock (lockAll); the repeat lock and unlock hold only
	// their key's shard's (shards.go).
	mu     sync.Mutex
	shards []lockShard
	// batches, batch and batchTo are send's buffers (driver.go): the
	// index of each peer's batch in a step, the batches, their peers.
	batches map[msg.NodeID]int
	batch   [][]msg.Envelope
	batchTo []msg.Member
	// followUps are inputs a step's events call for (an abandoned
	// admission's Unlock, a hook the store does not have): apply steps
	// them after the step that called for them, not inside it (driver.go).
	followUps []delegation.Event
	applying  bool // apply runs: it must not be entered again
	core      *core.Node
	closing   bool  // Close began: no new lockers
	closed    bool  // no more steps
	failed    error // the store failed: the node stopped stepping
	// stopped is failed wrapped in ErrStoreFailed, for Err to read without
	// the node's locks.
	stopped atomic.Pointer[error]
	waiters map[uint64]*waiter
	// armed is when the timer goroutine will tick next, as armedAt makes
	// it (0: not known): the repeat path lowers it with only its shard's
	// lock held, so it is atomic.
	armed atomic.Int64
	// epochCh is closed and replaced whenever an epoch is learned.
	epochCh chan struct{}
	// stepCh, once a waiter made it (nextStep), is closed after the next
	// step the node applies, or when the node fails or shuts down: Close
	// and Leave wait on it for the machines to change instead of polling.
	stepCh chan struct{}
	// lockable caches core.Node.Lockable for Lock's path (recomputed on
	// every epoch and membership scan); its reason is asked when false.
	lockable bool
	member   memberState

	// in is what the transport received and no step has taken yet
	// (receive).
	in inbox

	local        localLocks
	fencedWrites atomic.Uint64
	clockJumps   atomic.Uint64

	kick       chan struct{}
	stop       chan struct{}
	wg         sync.WaitGroup // the timer goroutine
	hooks      sync.WaitGroup // store hook workers
	hookQ      chan hookRun   // to an idle hook worker (unbuffered: none idle, none takes it)
	hookCtx    context.Context
	hookCancel context.CancelFunc
	closeOnce  sync.Once
	closeErr   error
}

// waiter is a Lock call waiting for its Admitted or Failed event.
type waiter struct {
	key  string
	done chan struct{}
	h    Handle
	err  error
}

// Open starts a node: it validates cfg, opens the store, bumps the
// incarnation (before anything is sent), starts the transport and memberlist,
// and restores the protocol state. A node with no epoch on disk bootstraps
// (cfg.Bootstrap) or joins (cfg.Join), and Open returns once it is a member of
// an agreed epoch; a restarted node returns at once and catches up in the
// background. ctx bounds the start, not the node's life.
func Open(ctx context.Context, cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := &Node{
		cfg:     cfg,
		log:     cfg.logger("homelock"),
		clock:   cfg.Clock,
		ring:    cfg.KeyRing,
		waiters: make(map[uint64]*waiter),
		shards:  newLockShards(core.HolderShards),
		epochCh: make(chan struct{}),
		kick:    make(chan struct{}, 1),
		hookQ:   make(chan hookRun),
		stop:    make(chan struct{}),
	}
	n.local.m = make(map[string]*localLock)
	n.member.init()
	if n.clock == nil {
		n.clock = NewBootClock()
	}
	n.boot, _ = n.clock.(*BootClock)
	if cfg.KeyRingFile != "" {
		r, err := fence.LoadKeyRing(cfg.KeyRingFile)
		if err != nil {
			return nil, fmt.Errorf("homelock: key ring: %w", err)
		}
		n.ring = r
	}
	n.hookCtx, n.hookCancel = context.WithCancel(context.Background())
	// Until the protocol starts, a failed start has sent and answered
	// nothing, so a store this Open created is removed with it; after that
	// the node may have promised something, and its store stays (S1).
	ok, spoke := false, false
	defer func() {
		if ok {
			return
		}
		st := n.store
		if !spoke {
			n.store = nil
		}
		_ = n.shutdown()
		if st != nil && !spoke {
			if err := st.Discard(); err != nil {
				n.log.Warn("cannot remove the store of a failed start", "dir", cfg.DataDir, "err", err)
			}
		}
	}()

	st, err := localstore.Open(cfg.DataDir, localstore.Options{
		FS: cfg.FS, NodeID: msg.NodeID(cfg.NodeID), ClusterID: cfg.ClusterID, Logger: cfg.logger("localstore"),
	})
	if err != nil {
		return nil, fmt.Errorf("homelock: open store: %w", err)
	}
	n.store = st
	// Tokens and request IDs begin with the incarnation: it is bumped and
	// synced before this node sends anything, so no restart reuses one.
	if n.inc, err = st.BumpIncarnation(); err != nil {
		return nil, fmt.Errorf("homelock: bump incarnation: %w", err)
	}
	es, err := st.LoadEpochState()
	if err != nil {
		return nil, fmt.Errorf("homelock: load epoch state: %w", err)
	}
	marker := false
	if es.Learned != nil {
		if marker, err = st.GatePassed(es.Learned.Epoch.Number); err != nil {
			return nil, fmt.Errorf("homelock: load gate marker: %w", err)
		}
	} else if !cfg.Bootstrap && len(cfg.Join) == 0 {
		return nil, fmt.Errorf("%w: data directory %q holds no epoch: set Bootstrap (a new cluster) or Join (an existing one)", ErrInvalidConfig, cfg.DataDir)
	}

	n.self = msg.Member{ID: msg.NodeID(cfg.NodeID), Store: st.Identity().StoreID, Addr: cfg.AdvertiseAddr, Version: cfg.protocolVersion()}
	if err := n.startTransport(); err != nil {
		return nil, err
	}
	if err := n.startMembership(); err != nil {
		return nil, err
	}
	spoke = true

	known, err := st.GossipAddrs()
	if err != nil {
		n.log.Warn("cannot read the members' gossip addresses; rejoining gossip needs seeds", "err", err)
	}
	now := n.clock.Now()
	n.lockAll()
	cc := n.coreConfig()
	cc.Members.Known = known
	if n.inc > 1 {
		// The home gates every key until then (the restart gate).
		cc.Members.RejoinAfter = now.Add(cfg.EpochLease + cfg.Skew)
	}
	n.core = core.New(cc, now, es, marker)
	// The intent goes in before the first Tick and before Started serves
	// Status: a new node reports what it waits for from its first answer.
	// A restart needs none: the epoch machine renews, the home reclaims,
	// gossip is rejoined from the members' remembered addresses, and a node
	// that finds itself removed joins again once its restart gate passed.
	waitFor := ""
	switch {
	case es.Learned != nil:
	case cfg.Bootstrap:
		n.core.StartBootstrap(n.initialIDs())
		waitFor = "bootstrap"
	default:
		n.core.WantJoin()
		waitFor = "join"
	}
	n.core.ObserveClocks(time.Time{}, now, n.clock.Wall()) // the first reading: nothing to compare yet
	n.noteEpoch()
	n.apply(now, n.core.Tick(now))
	n.unlockAll()
	n.log.Info("homelock node started", "store", msg.FormatStore(n.self.Store), "incarnation", n.inc,
		"grpc", n.self.Addr, "gossip", n.ml.Addr(), "epoch", learnedNumber(es.Learned))

	n.wg.Add(1)
	go n.run()
	if cfg.Started != nil {
		cfg.Started(n)
	}

	if waitFor != "" {
		if err := n.waitMember(ctx, true, waitFor); err != nil {
			return nil, err
		}
	}
	ok = true
	return n, nil
}

func learnedNumber(l *epoch.Learned) any {
	if l == nil {
		return "none"
	}
	return l.Epoch.Number
}

func (n *Node) coreConfig() core.Config {
	c := n.cfg
	cc := core.Config{
		Self: n.self,
		Inc:  n.inc,
		Epoch: epoch.Config{
			EpochLease:     c.EpochLease,
			MaxDrift:       c.MaxDrift,
			RetryInterval:  c.RetryInterval,
			PromiseTimeout: c.EpochLease / 3,
			Rand:           rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		},
		Home: home.Config{
			EpochLease:      c.EpochLease,
			Skew:            c.Skew,
			MaxLease:        c.MaxLease,
			MinUseful:       c.MinUseful,
			RetryInterval:   c.RetryInterval,
			MaxDelegations:  c.MaxDelegations,
			MaxPerRequester: c.MaxPerRequester,
			MaxWaiters:      c.MaxWaiters,
			Mutations:       c.mutations.home(),
		},
		Holder: delegation.Config{
			MaxDrift:      c.MaxDrift,
			MinUseful:     c.MinUseful,
			RetryInterval: c.RetryInterval,
			Lease:         c.MaxLease,
			// The driver's shard locks are the machine's shards.
			Shards:    len(n.shards),
			Mutations: c.mutations.holder(),
		},
	}
	cc.Members = core.MembersPacing(c.RetryInterval, c.DownAfter)
	cc.Members.Seeds = c.Join
	if n.ring != nil {
		cc.Home.Sign = n.signGrant
	}
	if r, ok := n.tr.(transport.Reacher); ok {
		cc.Reaches = r.Reached
	}
	return cc
}

// signGrant is the home's signer: the lockGrant.v1 a holder presents to a
// fence.Guard, bound to the key, the holder's node ID and this lock domain.
func (n *Node) signGrant(g home.GrantInfo) []byte {
	b, err := n.ring.Sign(g.Fence(n.cfg.ClusterID, n.cfg.GrantOperation))
	if err != nil {
		n.log.Warn("cannot sign grant", "key", g.Key, "token", g.Token, "err", err)
		return nil
	}
	return b
}

func (n *Node) startTransport() error {
	if n.cfg.Transport != nil {
		if n.self.Addr == "" {
			n.self.Addr = "mem:" + string(n.self.ID)
		}
		tr, err := n.cfg.Transport(n.self, n.receive)
		if err != nil {
			return fmt.Errorf("homelock: transport: %w", err)
		}
		n.tr = tr
		return nil
	}
	g, err := transport.NewGRPC(transport.Config{
		NodeID: n.self.ID, ListenAddr: n.cfg.GRPCAddr, TLS: n.cfg.TLS, Logger: n.cfg.logger("transport"),
		RelayAfter: n.cfg.relayAfter(),
	}, n.receive)
	if err != nil {
		return fmt.Errorf("homelock: start gRPC transport on %s: %w", n.cfg.GRPCAddr, err)
	}
	n.tr = g
	if n.self.Addr == "" {
		n.self.Addr = g.Addr()
	}
	return nil
}

func (n *Node) startMembership() error {
	host, port, err := splitPort(n.cfg.GossipAddr)
	if err != nil {
		return fmt.Errorf("%w: GossipAddr: %v", ErrInvalidConfig, err)
	}
	mc := transport.MembershipConfig{
		Meta: transport.Meta{NodeID: n.self.ID, StoreID: n.self.Store, GRPCAddr: n.self.Addr, Version: n.self.Version,
			Timings: n.coreConfig().Timings()},
		BindAddr:   host,
		BindPort:   port,
		SecretKey:  n.cfg.GossipKey,
		AcceptKeys: n.cfg.GossipAcceptKeys,
		Plaintext:  n.cfg.GossipPlaintext,
		Timings:    n.cfg.gossipTimings(),
		Logger:     n.cfg.logger("memberlist"),
	}
	if n.cfg.GossipPlaintext != transport.PlaintextRefused {
		n.log.Warn("gossip takes plaintext: a step for turning encryption on or off, not a place to stay (docs/operations.md)",
			"gossip_plaintext", n.cfg.GossipPlaintext.String())
	}
	if n.cfg.GossipAdvertise != "" {
		if mc.AdvertiseAddr, mc.AdvertisePort, err = splitPort(n.cfg.GossipAdvertise); err != nil {
			return fmt.Errorf("%w: GossipAdvertise: %v", ErrInvalidConfig, err)
		}
	}
	ml, err := transport.NewMembership(mc)
	if err != nil {
		return fmt.Errorf("homelock: start memberlist on %s: %w", n.cfg.GossipAddr, err)
	}
	// Seeds (Config.Join) and the remembered members are joined by the
	// driver, off the lock and retried (core.Node.Maintain): a seed that is
	// not up yet, or stopped, delays nothing.
	n.ml = ml
	return nil
}

func splitPort(addr string) (string, int, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port %q in %q", p, addr)
	}
	return h, port, nil
}

// Close stops the node; a ctx not yet done makes it a controlled shutdown.
// It stops admitting (lockers still waiting get ErrClosed), then drains and
// releases the delegations this node holds so their homes can grant them at
// once (waiting, bounded by ctx, for admitted critical sections to Unlock and
// for the store's barrier hook). Then it hands off the keys it is home for,
// as Leave does: the members agree an epoch without this node, it recalls the
// delegations it granted, and it keeps serving until
// learnedAt + EpochLease + Skew of that epoch, so that each new home pulls a
// clean Drained from it instead of waiting out its gate. It skips the
// handoff, and says why in the log, when this node is not a member, is the
// only one, or another member does not look alive in memberlist (leaving
// then could leave an epoch with no live majority; staying, a restart of
// this node restores it). Last it leaves memberlist and stops the timer, the
// transport and the store; handles still held are revoked. A node closed this
// way that is opened again asks to join once its restart gate has passed.
//
// If ctx ends first, Close stops where it is and shuts down all the same; its
// error wraps ctx.Err() and says what was not done (delegations not released,
// home keys not handed off). A Close whose ctx is already done is a kill: no
// drain, no release, no handoff, nothing sent; the node stays a member until
// failure detection removes it or it comes back. No goroutine started by the
// node outlives Close, unless a store hook ignores its cancelled context;
// memberlist's work in flight at Close (a probe waiting for its ack, a
// push/pull) ends by itself within a probe interval (up to 8x with
// awareness) or its TCP timeout, and can send at most the message it was
// sending.
// Close is idempotent.
func (n *Node) Close(ctx context.Context) error {
	n.closeOnce.Do(func() { n.closeErr = n.close(ctx) })
	return n.closeErr
}

func (n *Node) close(ctx context.Context) error {
	if ctx.Err() != nil {
		return n.shutdown() // a kill
	}
	n.lockAll()
	n.closing = true
	now := n.clock.Now()
	for id, w := range n.waiters {
		delete(n.waiters, id)
		w.err = fmt.Errorf("%w: key %q: node is closing", ErrClosed, w.key)
		close(w.done)
		if n.usable() {
			n.apply(now, n.core.Cancel(now, w.key, id))
		}
	}
	if n.usable() {
		for _, key := range n.core.Holder().HeldKeys() {
			n.apply(now, n.core.Relinquish(now, key))
		}
	}
	n.unlockAll()

	var errs []error
	if err := n.waitDrained(ctx); err != nil {
		errs = append(errs, fmt.Errorf("homelock: close: delegations not all released: %w", err))
	}
	if err := n.closeHandOff(ctx); err != nil {
		errs = append(errs, err)
	}
	if n.ml != nil {
		// A graceful memberlist leave lets peers count the DownAfter from now
		// rather than from their next failed probe. Its own short bound, even
		// when ctx has ended: memberlist waits without limit given none.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*n.cfg.RetryInterval)
		_ = n.ml.Leave(lctx)
		cancel()
	}
	return errors.Join(append(errs, n.shutdown())...)
}

// waitDrained waits until this node holds no delegation (the releases were
// sent) or ctx ends.
func (n *Node) waitDrained(ctx context.Context) error {
	for {
		n.lockAll()
		held := 0
		if n.usable() {
			_, ds := n.core.Stats()
			held = ds.Held
		}
		if held == 0 {
			n.unlockAll()
			return nil
		}
		step := n.nextStep()
		n.unlockAll()
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d still held: %w", held, ctx.Err())
		case <-step:
		}
	}
}

// shutdown stops everything that was started, in the reverse order, and
// revokes what is left. It is safe on a partly opened node.
func (n *Node) shutdown() error {
	n.lockAll()
	n.closing, n.closed = true, true
	n.stepped()
	for id, w := range n.waiters {
		delete(n.waiters, id)
		w.err = fmt.Errorf("%w: key %q", ErrClosed, w.key)
		close(w.done)
	}
	n.revokeAll("the node closed")
	n.unlockAll()

	close(n.stop)
	n.wg.Wait()
	n.hookCancel()
	var errs []error
	if n.ml != nil {
		errs = append(errs, n.ml.Close())
	}
	// Gossip joins in flight end with memberlist (at worst its TCP timeout).
	n.member.joins.Wait()
	if n.tr != nil {
		errs = append(errs, n.tr.Close())
	}
	// Hooks were cancelled; their completions find the node closed.
	n.hooks.Wait()
	if n.store != nil {
		errs = append(errs, n.store.Close())
	}
	return errors.Join(errs...)
}

// usable reports whether the core may be stepped (mu held).
func (n *Node) usable() bool { return n.core != nil && !n.closed && n.failed == nil }

// admissible is the error for a new locker, or nil (mu or a shard lock held:
// what it reads is written under lockAll).
func (n *Node) admissible(key string) error {
	switch {
	case n.failed != nil:
		return fmt.Errorf("%w: key %q: store failed: %v", ErrClosed, key, n.failed)
	case n.closing || n.core == nil:
		return fmt.Errorf("%w: key %q", ErrClosed, key)
	}
	return nil
}

// Err is non-nil once the node has stopped for good while open: its store
// refused a write, so what the node's machines believe durable may not be.
// It then refuses every call (ErrClosed), answers no peer, and has left
// gossip, so the others move the keys it was home for as after a crash.
// The error wraps ErrStoreFailed and the store's own error. A process
// running the node should Close it and exit (or Open it again once the data
// directory is fixed): nothing else brings it back.
func (n *Node) Err() error {
	if p := n.stopped.Load(); p != nil {
		return *p
	}
	return nil
}

// Incarnation is this start's incarnation (bumped on every Open).
func (n *Node) Incarnation() uint64 { return n.inc }

// ID is this node's ID.
func (n *Node) ID() string { return n.cfg.NodeID }

// GRPCAddr is where this node's transport listens (as advertised).
func (n *Node) GRPCAddr() string { return n.self.Addr }

// GossipAddr is this node's memberlist address, for other nodes' Join.
func (n *Node) GossipAddr() string { return n.ml.Addr() }

// Store is the node's Pebble store; an embedding store shares its DB with a
// fence.Guard under GuardPrefix (see localstore.Store.DB).
func (n *Node) Store() *localstore.Store { return n.store }

// KeyRing is the key ring that signs this node's grants (nil: unsigned), for
// building a fence.Guard that verifies them.
func (n *Node) KeyRing() *fence.KeyRing { return n.ring }
