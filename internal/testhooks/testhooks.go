package testhooks

import (
	"github.com/homelock/homelock/msg"
	"github.com/homelock/homelock/transport"
)

// NewTransport builds a node's transport from its member identity and the
// handler it must deliver to.
type NewTransport func(self msg.Member, h transport.Handler) (transport.Transport, error)

var (
	// SetTransport(cfg, f) makes the node built from *cfg (a
	// *homelock.Config) use f instead of gRPC; GRPCAddr is then not needed.
	SetTransport func(cfg any, f NewTransport)
	// SetProtocolVersion(cfg, v) makes the node advertise and speak v.
	SetProtocolVersion func(cfg any, v uint32)
)
