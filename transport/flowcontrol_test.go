package transport

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// countingProxy forwards TCP connections to target and counts the bytes
// flowing back from target to the dialler.
type countingProxy struct {
	lis  net.Listener
	back atomic.Int64
	wg   sync.WaitGroup
}

func newCountingProxy(t *testing.T, target string) *countingProxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &countingProxy{lis: lis}
	p.wg.Go(func() {
		for {
			in, err := lis.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			p.wg.Go(func() { _, _ = io.Copy(out, in); out.Close() })
			p.wg.Go(func() {
				_, _ = io.Copy(countingWriter{in, &p.back}, out)
				in.Close()
			})
		}
	})
	t.Cleanup(func() { lis.Close(); p.wg.Wait() })
	return p
}

type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n.Add(int64(n))
	return n, err
}

// A stream of lone envelopes, each sent after the previous one arrived,
// draws no traffic back from the receiver: no flow-control PING, PING ack
// or window update per frame (gRPC's dynamic window would send a PING and a
// window update after nearly every DATA frame, and make the sender write an
// ack for each).
func TestGRPCLoneFramesDrawNoControlTraffic(t *testing.T) {
	a, b := newGRPCNode(t, "a", nil), newGRPCNode(t, "b", nil)
	defer closeAll(t, a.t, b.t)
	proxy := newCountingProxy(t, b.t.Addr())
	to := b.self
	to.Addr = proxy.lis.Addr().String()

	require.NoError(t, a.t.Send(to, numbered(a.self, to.ID, 0)))
	b.in.waitLen(t, 1, 5*time.Second)
	// The connection's setup (settings and their acks) is behind us.
	time.Sleep(50 * time.Millisecond)
	before := proxy.back.Load()
	const frames = 200
	for i := uint64(1); i <= frames; i++ {
		require.NoError(t, a.t.Send(to, numbered(a.self, to.ID, i)))
		b.in.waitLen(t, int(i)+1, 5*time.Second)
	}
	checkOrdered(t, b.in.snapshot(), true)
	time.Sleep(50 * time.Millisecond)
	back := proxy.back.Load() - before
	require.Less(t, back, int64(frames), "%d bytes came back for %d lone frames", back, frames)
}
