package transport

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/homelock/homelock/msg"
	"github.com/homelock/homelock/transport/pb"
)

// Config configures the gRPC transport. Zero fields take DefaultConfig's values.
type Config struct {
	// NodeID is this node. The receiver uses it to order streams from one
	// sender across reconnects: a newer stream from the same node ID
	// supersedes the older one, so nothing the old one still buffered is
	// delivered after the new one's messages. Required.
	NodeID msg.NodeID

	// ListenAddr is host:port for the server ("127.0.0.1:0" picks a port;
	// GRPC.Addr reports it). Required.
	ListenAddr string

	// TLS loads certificates from files; ServerTLS and ClientTLS give them
	// directly. Set at most one of the two forms; neither means plaintext.
	TLS *TLSFiles
	// ServerTLS is the server's configuration; with ClientAuth set to
	// tls.RequireAndVerifyClientCert it is mutual TLS.
	ServerTLS *tls.Config
	// ClientTLS is used to dial peers; set both or neither.
	ClientTLS *tls.Config

	// MaxMsgSize bounds one gRPC message (a batch of envelopes) in both
	// directions. It must hold the largest envelope (pb.MaxEnvelopeSize)
	// plus framing; batches are cut below it.
	MaxMsgSize int

	// QueueLen is how many envelopes may wait for one peer; Send drops
	// beyond it.
	QueueLen int

	// MaxBatch is the most envelopes written to a stream in one message.
	MaxBatch int

	// KeepaliveTime is how long a connection may be idle before a ping
	// checks it (gRPC enforces at least 10s on clients), and
	// KeepaliveTimeout how long the ping may take before the connection is
	// declared dead and redialled.
	KeepaliveTime    time.Duration
	KeepaliveTimeout time.Duration

	// RelayAfter is how long a peer's sender may go without an open stream,
	// or with one that TCP retransmits on while the peer acknowledges
	// nothing (on Linux, read from TCP_INFO as the sender writes and while
	// what it wrote is unacknowledged, at most every quarter of RelayAfter,
	// within 50 to 250 ms; stall.go), before what is sent to that peer also
	// goes through relays: up to two other peers, each with an open stream,
	// whose own stream reaches the addressee, forward it (a partial
	// partition, relay.go). A stalled sender relays what it wrote since the
	// peer's last acknowledgement too. For RelayAfter after a peer's
	// envelope came through a relay, what is sent to that peer goes through
	// relays too. Negative
	// turns relaying off; this node still forwards for others. A node
	// passes a quarter of its MaxLease, at most a second: a held section's
	// renewal has half a lease to go through relays and come back.
	RelayAfter time.Duration
	// ReconnectBase and ReconnectMax bound the exponential backoff between
	// dials of a peer that is down.
	ReconnectBase time.Duration
	ReconnectMax  time.Duration

	// Logger receives connection events; nil discards them. It is used as
	// given: the caller names the component and node.
	Logger *slog.Logger

	// readStall reads a peer connection's TCP state for the stall check
	// (ackSilence when nil; nil off Linux turns the check off); tests set
	// it to stall a loopback connection, which no test without root can
	// make TCP do.
	readStall func(*net.TCPConn) (st tcpState, ok bool)
}

// DefaultConfig returns the defaults; NodeID and ListenAddr must still be set.
func DefaultConfig() Config {
	return Config{
		MaxMsgSize:       pb.MaxEnvelopeSize + 64<<10,
		QueueLen:         4096,
		MaxBatch:         256,
		KeepaliveTime:    10 * time.Second,
		KeepaliveTimeout: 3 * time.Second,
		ReconnectBase:    20 * time.Millisecond,
		ReconnectMax:     time.Second,
		RelayAfter:       time.Second,
	}
}

// withDefaults fills zero fields from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.MaxMsgSize == 0 {
		c.MaxMsgSize = d.MaxMsgSize
	}
	if c.QueueLen == 0 {
		c.QueueLen = d.QueueLen
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = d.MaxBatch
	}
	if c.KeepaliveTime == 0 {
		c.KeepaliveTime = d.KeepaliveTime
	}
	if c.KeepaliveTimeout == 0 {
		c.KeepaliveTimeout = d.KeepaliveTimeout
	}
	if c.ReconnectBase == 0 {
		c.ReconnectBase = d.ReconnectBase
	}
	if c.ReconnectMax == 0 {
		c.ReconnectMax = d.ReconnectMax
	}
	if c.RelayAfter == 0 {
		c.RelayAfter = d.RelayAfter
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate lists every violation, naming the field and its value. It checks
// the config as given: zero fields that NewGRPC would default are accepted.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrBadConfig}, args...)...))
	}
	if c.NodeID == "" {
		bad("NodeID is empty")
	}
	if len(c.NodeID) > pb.MaxIDLen {
		bad("NodeID has %d bytes, limit %d", len(c.NodeID), pb.MaxIDLen)
	}
	if c.ListenAddr == "" {
		bad("ListenAddr is empty")
	}
	if c.TLS != nil && (c.ServerTLS != nil || c.ClientTLS != nil) {
		bad("set TLS (files) or ServerTLS/ClientTLS, not both")
	}
	if (c.ServerTLS == nil) != (c.ClientTLS == nil) {
		bad("ServerTLS and ClientTLS must be set together (ServerTLS set: %t, ClientTLS set: %t)", c.ServerTLS != nil, c.ClientTLS != nil)
	}
	if c.MaxMsgSize < 64<<10 {
		bad("MaxMsgSize (%d) must be at least 64 KiB", c.MaxMsgSize)
	}
	if c.QueueLen < 1 {
		bad("QueueLen (%d) must be positive", c.QueueLen)
	}
	if c.MaxBatch < 1 {
		bad("MaxBatch (%d) must be positive", c.MaxBatch)
	}
	if c.KeepaliveTime < 0 || c.KeepaliveTimeout < 0 {
		bad("KeepaliveTime (%s) and KeepaliveTimeout (%s) must not be negative", c.KeepaliveTime, c.KeepaliveTimeout)
	}
	if c.ReconnectBase <= 0 || c.ReconnectMax < c.ReconnectBase {
		bad("ReconnectBase (%s) must be positive and at most ReconnectMax (%s)", c.ReconnectBase, c.ReconnectMax)
	}
	return errors.Join(errs...)
}
