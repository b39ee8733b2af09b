package harness

import (
	"context"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// unaryPing is the yardstick for a first lock: a plain gRPC unary call on
// loopback (the standard health service's Check, a few bytes each way, no
// work behind it) from a client to a server in this process, as the nodes
// are. The transport has no unary call of its own: its one RPC is a stream.
type unaryPing struct {
	srv    *grpc.Server
	served chan error
	conn   *grpc.ClientConn
	client healthpb.HealthClient
}

// pingWarmup calls are made before any is timed: the connection's set-up and
// the first calls' allocations are not a round trip.
const pingWarmup = 100

func newUnaryPing(ctx context.Context) (*unaryPing, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &unaryPing{srv: grpc.NewServer(), served: make(chan error, 1)}
	healthpb.RegisterHealthServer(p.srv, health.NewServer())
	go func() { p.served <- p.srv.Serve(lis) }()
	p.conn, err = grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		p.close()
		return nil, err
	}
	p.client = healthpb.NewHealthClient(p.conn)
	for range pingWarmup {
		if _, err := p.roundTrip(ctx); err != nil {
			p.close()
			return nil, err
		}
	}
	return p, nil
}

// roundTrip times one call.
func (p *unaryPing) roundTrip(ctx context.Context) (time.Duration, error) {
	t0 := time.Now()
	_, err := p.client.Check(ctx, &healthpb.HealthCheckRequest{})
	return time.Since(t0), err
}

// close stops the client and the server and waits for the server's loop.
func (p *unaryPing) close() {
	if p.conn != nil {
		_ = p.conn.Close()
	}
	p.srv.Stop()
	<-p.served
}
