// Package clientapi is the small gRPC API that `homelock node` serves to
// local tools: Lock (a stream that holds a lock while it is open) and Status.
// `homelock lock` and `homelock status` are its clients. The peer protocol
// between nodes is elsewhere (transport); this API carries no protocol
// decision, it only calls homelock.Node.
package clientapi
