package transport

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/homelock/homelock/msg"
	"github.com/homelock/homelock/transport/internal/samples"
	"github.com/homelock/homelock/transport/pb"
)

// oneFrameStream is a peer's stream that sends one frame, then ends.
type oneFrameStream struct {
	grpc.ClientStreamingServer[pb.Batch, pb.StreamSummary]
	ctx  context.Context
	envs []inbound
}

func (s *oneFrameStream) Context() context.Context { return s.ctx }

func (s *oneFrameStream) RecvMsg(m any) error {
	if s.envs == nil {
		return io.EOF
	}
	m.(*inFrame).envs, s.envs = s.envs, nil
	return nil
}

func (s *oneFrameStream) SendAndClose(*pb.StreamSummary) error { return nil }

func (s *oneFrameStream) SendHeader(metadata.MD) error { return nil }

// A handler that panics (the node's store hit a fatal error while the step
// ran) must leave the sender's slot and the slot table free as the panic
// unwinds: Stream's deferred releaseSlot takes both, and before the slot
// was let go by a defer it waited for it forever, so the node hung, alive
// in gossip, instead of crashing.
func TestHandlerPanicFreesTheSlot(t *testing.T) {
	g, err := NewGRPC(Config{NodeID: "b", ListenAddr: "127.0.0.1:0"}, func(msg.Envelope) { panic("store failed") })
	require.NoError(t, err)
	defer func() { require.NoError(t, g.Close()) }()
	env := samples.Envelopes()[0]
	stream := &oneFrameStream{
		ctx:  metadata.NewIncomingContext(context.Background(), metadata.Pairs(senderMetadataKey, "a")),
		envs: []inbound{{env: env, size: 1}},
	}
	unwound := make(chan any, 1)
	go func() {
		defer func() { unwound <- recover() }()
		_ = (&receiver{g: g}).Stream(stream)
	}()
	select {
	case r := <-unwound:
		require.Equal(t, "store failed", r)
	case <-time.After(5 * time.Second):
		t.Fatal("the handler's panic did not unwind out of Stream within 5s")
	}
	g.sendersMu.Lock()
	_, kept := g.senders["a"]
	g.sendersMu.Unlock()
	require.False(t, kept, "the ended stream's slot is still in the table")
}
