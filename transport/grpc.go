package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/homelock/homelock/msg"
	"github.com/homelock/homelock/transport/pb"
)

// GRPC is the Transport between processes: one gRPC server receiving, and
// per peer one queue, one sender goroutine and one long-lived client stream.
type GRPC struct {
	cfg     Config
	handler Handler
	log     *slog.Logger
	stats   counters

	lis      net.Listener
	srv      *grpc.Server
	dialOpts []grpc.DialOption
	codec    batchCodec

	// ctx is cancelled by Close; every peer goroutine and stream derives from it.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.RWMutex
	closed bool
	peers  map[msg.NodeID]*peer
	// relays holds, per node used as a relay, the sender of the Relay
	// stream to it (relay.go); its addr follows the node's entry in peers.
	relays map[msg.NodeID]*peer

	// senders orders streams per sending node (see receiver.go).
	sendersMu sync.Mutex
	senders   map[msg.NodeID]*senderSlot
	// heard is when a frame last arrived from each sender (Unix ns), kept
	// after its streams end (HeardFrom). The map is under sendersMu; each
	// sender's streams store into its entry.
	heard map[msg.NodeID]*atomic.Int64
	// senderBoots holds, for each sender in senders, the boot of the
	// process whose stream holds its slot (0: one of an earlier release).
	// Reached reads it without sendersMu, which a delivery can hold up
	// while the driver, holding its own lock, asks.
	senderBoots sync.Map // msg.NodeID → uint64

	wg       sync.WaitGroup // peer goroutines
	serveErr chan error

	// boot tells this process from the node's earlier and later ones
	// (random, never 0): every stream carries it both ways (restart.go).
	boot uint64
}

var (
	_ Transport = (*GRPC)(nil)
	_ Batcher   = (*GRPC)(nil)
	_ Reacher   = (*GRPC)(nil)
)

// NewGRPC starts the server on cfg.ListenAddr and returns the transport; h
// receives every envelope that arrives.
func NewGRPC(cfg Config, h Handler) (*GRPC, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if h == nil {
		return nil, fmt.Errorf("%w: Handler is nil", ErrBadConfig)
	}
	cfg = cfg.withDefaults()
	if cfg.readStall == nil {
		cfg.readStall = ackSilence
	}
	serverTLS, clientTLS := cfg.ServerTLS, cfg.ClientTLS
	if cfg.TLS != nil {
		var err error
		if serverTLS, clientTLS, err = cfg.TLS.Load(); err != nil {
			return nil, err
		}
	}

	// A static flow-control window: gRPC's dynamic one estimates the
	// bandwidth-delay product with a PING after every DATA frame that finds
	// none outstanding, which on a stream of small request-reply frames is
	// nearly every frame, and each costs a PING, its ack and a window update
	// (two more writes and reads per frame). A window as large as the
	// largest message lets one message of any size leave without waiting
	// for a window update.
	window := int32(min(cfg.MaxMsgSize, math.MaxInt32))
	codec := newBatchCodec()

	srvOpts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(cfg.MaxMsgSize),
		grpc.MaxSendMsgSize(cfg.MaxMsgSize),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: cfg.KeepaliveTime, Timeout: cfg.KeepaliveTimeout}),
		// Clients ping idle connections on KeepaliveTime; allow it, or the
		// server would close them for "too many pings".
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: cfg.KeepaliveTime / 2, PermitWithoutStream: true}),
		// Close must not return while a Handler still runs.
		grpc.WaitForHandlers(true),
		grpc.StaticStreamWindowSize(window),
		grpc.StaticConnWindowSize(window),
		// The server has one service, whose Batches the batch codec reads;
		// it passes the rest to the proto codec.
		grpc.ForceServerCodecV2(codec),
	}
	clientCreds := insecure.NewCredentials()
	if serverTLS != nil {
		srvOpts = append(srvOpts, grpc.Creds(credentials.NewTLS(serverTLS)))
		clientCreds = credentials.NewTLS(clientTLS)
	}

	lis, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		return nil, fmt.Errorf("transport: listen on %s: %w", cfg.ListenAddr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	g := &GRPC{
		cfg:      cfg,
		handler:  h,
		log:      cfg.Logger,
		lis:      lis,
		srv:      grpc.NewServer(srvOpts...),
		ctx:      ctx,
		cancel:   cancel,
		peers:    make(map[msg.NodeID]*peer),
		relays:   make(map[msg.NodeID]*peer),
		senders:  make(map[msg.NodeID]*senderSlot),
		serveErr: make(chan error, 1),
		codec:    codec,
		boot:     newBoot(),
		dialOpts: []grpc.DialOption{
			grpc.WithTransportCredentials(clientCreds),
			grpc.WithStaticStreamWindowSize(window),
			grpc.WithStaticConnWindowSize(window),
			grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(cfg.MaxMsgSize), grpc.MaxCallRecvMsgSize(cfg.MaxMsgSize)),
			grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: cfg.KeepaliveTime, Timeout: cfg.KeepaliveTimeout, PermitWithoutStream: true}),
			grpc.WithConnectParams(grpc.ConnectParams{
				Backoff:           backoff.Config{BaseDelay: cfg.ReconnectBase, Multiplier: 2, Jitter: 0.2, MaxDelay: cfg.ReconnectMax},
				MinConnectTimeout: cfg.ReconnectMax + cfg.KeepaliveTimeout,
			}),
		},
	}
	pb.RegisterTransportServer(g.srv, &receiver{g: g})
	go func() { g.serveErr <- g.srv.Serve(lis) }()
	return g, nil
}

// Addr is the address the server listens on (with the port chosen when
// ListenAddr asked for port 0).
func (g *GRPC) Addr() string { return g.lis.Addr().String() }

// Send implements Transport.
func (g *GRPC) Send(to msg.Member, env msg.Envelope) error {
	o, err := g.encode(env)
	if err != nil {
		return err
	}
	p, err := g.peer(to)
	if err != nil {
		return err
	}
	p.enqueue(o)
	g.relayIfStuck(p, o)
	return nil
}

// SendBatch implements Batcher: the envelopes take one slot of to's queue
// and leave in one stream frame.
func (g *GRPC) SendBatch(to msg.Member, envs []msg.Envelope) error {
	var errs []error
	group := make([]outgoing, 0, len(envs))
	for _, env := range envs {
		o, err := g.encode(env)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		group = append(group, o)
	}
	if len(group) > 0 {
		p, err := g.peer(to)
		if err != nil {
			return err
		}
		o := group[0]
		if len(group) > 1 {
			o = outgoing{group: group}
		}
		p.enqueue(o)
		g.relayIfStuck(p, o)
	}
	return errors.Join(errs...)
}

func (g *GRPC) encode(env msg.Envelope) (outgoing, error) {
	data, err := pb.Encode(env)
	if err != nil {
		return outgoing{}, err
	}
	if len(data) > g.cfg.MaxMsgSize-batchOverhead {
		return outgoing{}, fmt.Errorf("%w: %s envelope of %d bytes exceeds MaxMsgSize %d", ErrMessageTooLarge, env.Body.Kind(), len(data), g.cfg.MaxMsgSize)
	}
	return outgoing{kind: env.Body.Kind(), data: data}, nil
}

// peer returns the sender for to, starting it on first use, and replacing it
// when the node's address changed (it restarted elsewhere).
func (g *GRPC) peer(to msg.Member) (*peer, error) {
	g.mu.RLock()
	p, ok := g.peers[to.ID]
	closed := g.closed
	g.mu.RUnlock()
	if closed {
		return nil, ErrClosed
	}
	if ok && p.addr == to.Addr {
		return p, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, ErrClosed
	}
	old := g.peers[to.ID]
	if old != nil {
		if old.addr == to.Addr {
			return old, nil
		}
		old.stop()
	}
	p, err := newPeer(g, to, false)
	if err != nil {
		return nil, err
	}
	if old != nil {
		// The peer's relaying to this node is about the node, not its
		// address.
		p.relayedIn.Store(old.relayedIn.Load())
	}
	g.peers[to.ID] = p
	return p, nil
}

// Stats implements Transport.
func (g *GRPC) Stats() Stats { return g.stats.snapshot() }

// Close implements Transport.
func (g *GRPC) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	peers, relays := g.peers, g.relays
	g.peers, g.relays = nil, nil
	g.mu.Unlock()

	g.cancel()
	for _, p := range peers {
		p.stop()
	}
	for _, p := range relays {
		p.stop()
	}
	g.wg.Wait()
	g.srv.Stop()
	if err := <-g.serveErr; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("transport: server: %w", err)
	}
	return nil
}
