// Package testhooks lets tests inside this module reach settings of
// homelock.Config that are not part of the public API: an in-memory transport
// in place of gRPC, and a protocol version other than
// homelock.ProtocolVersion (to test capability negotiation). The root package
// fills these functions in its init; being internal, nothing outside the
// module can call them.
package testhooks
