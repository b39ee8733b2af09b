package transport

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/homelock/homelock/msg"
	"github.com/homelock/homelock/transport/internal/samples"
	"github.com/homelock/homelock/transport/pb"
)

func encodedSamples(t testing.TB) [][]byte {
	var out [][]byte
	for _, env := range samples.Envelopes() {
		b, err := pb.Encode(env)
		require.NoError(t, err)
		out = append(out, b)
	}
	return out
}

// A frame the batch codec writes is the pb.Batch the generated code writes,
// small (unpooled) or large (pooled), with empty envelopes too.
func TestBatchCodecWritesABatch(t *testing.T) {
	codec := newBatchCodec()
	big := bytes.Repeat([]byte{7}, 5000)
	for _, envs := range [][][]byte{
		{[]byte("one")},
		{{}, []byte("after an empty one")},
		encodedSamples(t),
		{big, big},
	} {
		var frame outFrame
		for _, e := range envs {
			frame = append(frame, outgoing{data: e})
		}
		data, err := codec.Marshal(&frame)
		require.NoError(t, err)
		want, err := proto.Marshal(&pb.Batch{Envelopes: envs})
		require.NoError(t, err)
		require.Equal(t, want, data.Materialize())
		data.Free()
	}
}

// The batch codec reads a Batch the generated code wrote into its envelopes,
// decoded, refusing one it cannot decode without losing the others; it
// hands any other message to the proto codec.
func TestBatchCodecReadsABatch(t *testing.T) {
	codec := newBatchCodec()
	envs := encodedSamples(t)
	wire, err := proto.Marshal(&pb.Batch{Envelopes: append([][]byte{{0xff}}, envs...)})
	require.NoError(t, err)
	var frame inFrame
	for range 2 { // a frame is reused from read to read
		// Split across buffers, as grpc may hand a message over.
		half := len(wire) / 2
		require.NoError(t, codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire[:half]), mem.SliceBuffer(wire[half:])}, &frame))
		require.Len(t, frame.envs, 1+len(envs))
		require.ErrorIs(t, frame.envs[0].err, pb.ErrMalformed)
		for i, want := range samples.Envelopes() {
			got := frame.envs[1+i]
			require.NoError(t, got.err)
			require.Equal(t, want, got.env)
			require.Equal(t, len(envs[i]), got.size)
		}
	}

	data, err := codec.Marshal(&pb.StreamSummary{})
	require.NoError(t, err)
	require.NoError(t, codec.Unmarshal(data, &pb.StreamSummary{}))
}

// eachEnvelope is proto.Unmarshal into a pb.Batch: the same envelopes, in
// order, and an error for the same inputs.
func FuzzEachEnvelope(f *testing.F) {
	wire, err := proto.Marshal(&pb.Batch{Envelopes: encodedSamples(f)})
	require.NoError(f, err)
	f.Add(wire)
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x00, 0x08, 0x01, 0x0b, 0x0c}) // empty envelope, a varint 1, a group
	f.Add([]byte{0x0c})                               // an end group alone
	f.Add(protowire.AppendTag(nil, 1, protowire.Fixed32Type))
	f.Fuzz(func(t *testing.T, b []byte) {
		var got [][]byte
		err := eachEnvelope(b, func(e []byte) { got = append(got, e) })
		var want pb.Batch
		wantErr := proto.Unmarshal(b, &want)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("eachEnvelope error %v, proto.Unmarshal error %v", err, wantErr)
		}
		if err != nil {
			require.True(t, errors.Is(err, errMalformedBatch))
			return
		}
		require.Len(t, got, len(want.Envelopes))
		for i := range got {
			require.True(t, bytes.Equal(want.Envelopes[i], got[i]), "envelope %d", i)
		}
	})
}

// plainReceiver is a Transport server on grpc's own proto codec, as a
// version before the batch codec ran it.
type plainReceiver struct {
	pb.UnimplementedTransportServer
	mu      sync.Mutex
	batches []*pb.Batch
}

func (r *plainReceiver) Stream(s grpc.ClientStreamingServer[pb.Batch, pb.StreamSummary]) error {
	for {
		b, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return s.SendAndClose(&pb.StreamSummary{})
		}
		if err != nil {
			return err
		}
		r.mu.Lock()
		r.batches = append(r.batches, b)
		r.mu.Unlock()
	}
}

func (r *plainReceiver) envelopes(t *testing.T) []msg.Envelope {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []msg.Envelope
	for _, b := range r.batches {
		for _, e := range b.Envelopes {
			env, err := pb.Decode(e)
			require.NoError(t, err)
			out = append(out, env)
		}
	}
	return out
}

// A sender on the batch codec and a receiver on the generated code (an
// older node) understand each other; the other way round is
// TestGRPCRefusesBadEnvelope's stream.
func TestBatchCodecTalksToTheProtoCodec(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	plain := &plainReceiver{}
	pb.RegisterTransportServer(srv, plain)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	a := newGRPCNode(t, "a", nil)
	defer closeAll(t, a.t)
	to := msg.Member{ID: "old", Addr: lis.Addr().String()}
	var want []msg.Envelope
	for _, env := range samples.Envelopes() {
		env.From, env.To = a.self, to.ID
		want = append(want, env)
	}
	require.NoError(t, a.t.SendBatch(to, want[:3]))
	for _, env := range want[3:] {
		require.NoError(t, a.t.Send(to, env))
	}
	require.Eventually(t, func() bool { return len(plain.envelopes(t)) == len(want) }, 5*time.Second, time.Millisecond)
	require.Equal(t, want, plain.envelopes(t))
}
