package transport

import (
	"errors"

	"github.com/homelock/homelock/transport/pb"
)

var (
	// ErrClosed is returned by Send (and by Network.Endpoint, Membership
	// methods) after Close.
	ErrClosed = errors.New("transport: closed")

	// ErrBadConfig is wrapped by Config.Validate, NetworkConfig and
	// MembershipConfig checks; the message names the field and its value.
	ErrBadConfig = errors.New("transport: invalid config")

	// ErrAddrInUse is returned by Network.Endpoint when an open endpoint
	// already has that node ID.
	ErrAddrInUse = errors.New("transport: node ID already has an endpoint")

	// ErrBadMeta is returned by DecodeMeta for metadata that is not a
	// homelock Meta, and by EncodeMeta for one over memberlist's limit.
	ErrBadMeta = errors.New("transport: bad member metadata")

	// ErrJoin is returned by NewMembership and Membership.Join when no seed
	// could be contacted (a seed with another encryption key counts as
	// unreachable: memberlist cannot read its answer).
	ErrJoin = errors.New("transport: join failed")
)

// Wire errors, returned by Send for an envelope that cannot be encoded and
// counted as refusals on receipt. They are pb's sentinels, re-exported so a
// caller need not import the wire package.
var (
	ErrUnknownMessage  = pb.ErrUnknownMessage
	ErrUnknownField    = pb.ErrUnknownField
	ErrBadEnum         = pb.ErrBadEnum
	ErrMessageTooLarge = pb.ErrMessageTooLarge
	ErrMalformed       = pb.ErrMalformed
)
