// Package clientapi is the small gRPC API that `homelock node` serves to
// local tools: Lock (a stream that holds a lock while it is open) and Status.
// `homelock lock` and `homelock status` are its clients. The peer protocol
// between nodes is elsewhere (transport); this API carries no protocol
// decision, it only calls homelock.Node.
//
// A Lock stream sends ACQUIRED, then VALID for each ping, and ends with
// RELEASED after the client closes its side, or LOST if the lock ended
// first. When the node shuts down (Server.Stop) a holder gets LOST at once
// but keeps the lock until it ends the stream: `homelock lock` stops its
// command first, so the next holder never starts beside it. The client says
// in its LockRequest how long that may take (drain_nanos, its --kill-after
// plus 2s); Server.DrainWait is the longest asked, which the node waits for
// (at least 10s, at most 10min) before it cuts the streams. A client with
// other nodes to ask sets home_silence_nanos (homelock.WithHomeSilence): the
// node then fails the lock as unavailable once the key's home has answered
// it nothing for that long, and the client asks the next node.
package clientapi
