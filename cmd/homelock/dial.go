package main

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// dialNode makes the client connection to a node's client API (lock and
// status). It does not connect by itself: the first call does, bounded by
// that call's context, so a node that is paused or a port that accepts and
// never answers costs the caller its own deadline, never gRPC's 20 s
// connect timeout.
func dialNode(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
}
