package transport

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/homelock/homelock/msg"
	"github.com/homelock/homelock/transport/pb"
)

// batchCodec is the Transport stream's gRPC codec. A frame on the wire is a
// pb.Batch, byte for byte as the generated code writes it, and every Batch
// the generated code reads, it reads alike, so any version of either side
// talks to any other. What it skips is the generated struct in between: a
// frame is written straight from the envelopes the senders encoded, and read
// straight into decoded envelopes, without a copy of each envelope's bytes
// and a Batch per frame. Every other message (StreamSummary) goes through
// grpc's proto codec.
//
// Its name is the proto codec's, so the stream's content-subtype says proto,
// which is what a receiver of any version reads it with.
type batchCodec struct{ proto encoding.CodecV2 }

func newBatchCodec() batchCodec { return batchCodec{proto: encoding.GetCodecV2(grpcproto.Name)} }

func (batchCodec) Name() string { return grpcproto.Name }

// batchEnvelopes is pb.Batch's one field, repeated bytes envelopes = 1.
const batchEnvelopes protowire.Number = 1

// outFrame is one stream write: encoded envelopes.
type outFrame []outgoing

// inFrame is one stream read: each envelope decoded, or why not. Its decoder
// lives as long as the stream (see pb.Decoder).
type inFrame struct {
	dec  pb.Decoder
	envs []inbound
}

type inbound struct {
	env  msg.Envelope
	err  error
	size int
}

func (c batchCodec) Marshal(v any) (mem.BufferSlice, error) {
	f, ok := v.(*outFrame)
	if !ok {
		return c.proto.Marshal(v)
	}
	size := 0
	for _, o := range *f {
		size += protowire.SizeTag(batchEnvelopes) + protowire.SizeBytes(len(o.data))
	}
	if mem.IsBelowBufferPoolingThreshold(size) {
		return mem.BufferSlice{mem.SliceBuffer(appendFrame(make([]byte, 0, size), *f))}, nil
	}
	pool := mem.DefaultBufferPool()
	buf := pool.Get(size)
	*buf = appendFrame((*buf)[:0], *f)
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

func appendFrame(b []byte, f outFrame) []byte {
	for _, o := range f {
		b = protowire.AppendBytes(protowire.AppendTag(b, batchEnvelopes, protowire.BytesType), o.data)
	}
	return b
}

func (c batchCodec) Unmarshal(data mem.BufferSlice, v any) error {
	f, ok := v.(*inFrame)
	if !ok {
		return c.proto.Unmarshal(data, v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	clear(f.envs)
	f.envs = f.envs[:0]
	return eachEnvelope(buf.ReadOnlyData(), func(b []byte) {
		env, err := f.dec.Decode(b)
		f.envs = append(f.envs, inbound{env: env, err: err, size: len(b)})
	})
}

var errMalformedBatch = errors.New("transport: malformed batch")

// eachEnvelope calls f with each envelope of the Batch b, in order. It fails
// where proto.Unmarshal into a pb.Batch fails, and like it skips fields
// Batch does not have (a field 1 of another wire type among them), which
// the receiver never read.
func eachEnvelope(b []byte, f func([]byte)) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %v", errMalformedBatch, protowire.ParseError(n))
		}
		if num > protowire.MaxValidNumber {
			// ConsumeTag leaves this check to its caller.
			return fmt.Errorf("%w: field number %d", errMalformedBatch, num)
		}
		b = b[n:]
		if num == batchEnvelopes && typ == protowire.BytesType {
			env, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return fmt.Errorf("%w: %v", errMalformedBatch, protowire.ParseError(n))
			}
			f(env)
			b = b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return fmt.Errorf("%w: %v", errMalformedBatch, protowire.ParseError(n))
		}
		b = b[n:]
	}
	return nil
}
