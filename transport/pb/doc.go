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
//
// The messages a lock sends (the delegation kinds and epoch renewals) are
// encoded and decoded by a direct codec (direct.go) that skips the generated
// structs: it writes exactly the bytes proto.Marshal writes and reads only
// that plain form, handing anything else to the generated code, so what
// Decode accepts does not depend on the path (FuzzDirectEncode,
// FuzzDirectDecode). The stream's frames have a codec of their own (the
// transport's batch codec) that writes the envelopes' bytes as they are.
package pb
