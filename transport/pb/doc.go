// Package pb is homelock's wire format: the protobuf mirror of package msg
// (homelock.proto), the generated message and gRPC code, and the strict
// converters Encode and Decode.
//
// Decode refuses instead of guessing. A receiver that half understands a
// message from a newer version could act on a Grant without the field that
// limits it, so an unknown body kind, an unknown field anywhere in the
// envelope, an enum value out of range or a field over its bound (limits.go)
// is a named error, and the transport drops and counts the message. Versions
// of the lock protocol are mutually exclusive (docs/design.md,
// Capability negotiation): a cluster changes its wire format only through an epoch
// whose members all speak the new one.
package pb
