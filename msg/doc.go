// Package msg holds the protocol's values as plain Go data: members, epochs,
// ballots and certificates, and every message that the epoch, home and
// delegation state machines exchange.
//
// It plays the part raftpb plays for etcd's raft: the state machines, the
// simulator and the transport all speak these types, and only the transport
// knows how they look on the wire (protobuf). Nothing here does I/O or keeps
// state; the values are immutable once sent (a receiver may keep a message
// but must not change it, since the simulator duplicates messages by sharing
// them).
package msg
