package transport

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/homelock/homelock/msg"
)

// holdingProxy forwards TCP connections from its address to a target. Hold
// makes every connection it carries swallow what it is sent and never
// close, as a connection does whose end its client has not read yet (or
// one over a path that drops packets); connections accepted after Hold go
// to the target set by Retarget.
type holdingProxy struct {
	lis    net.Listener
	mu     sync.Mutex
	target string
	held   []*atomic.Bool
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newHoldingProxy(t *testing.T, target string) *holdingProxy {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &holdingProxy{lis: lis, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *holdingProxy) addr() string { return p.lis.Addr().String() }

func (p *holdingProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.lis.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		held := new(atomic.Bool)
		p.held = append(p.held, held)
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, s, held)
		go p.pipe(s, c, held)
	}
}

// pipe copies from src to dst until src ends; once held it reads and drops,
// and leaves dst open when src ends.
func (p *holdingProxy) pipe(src, dst net.Conn, held *atomic.Bool) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !held.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !held.Load() {
				_ = dst.Close()
			}
			return
		}
	}
}

func (p *holdingProxy) hold(next string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, h := range p.held {
		h.Store(true)
	}
	p.target = next
}

func (p *holdingProxy) close() {
	_ = p.lis.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// A peer restarts at its address before this node has read the end of its
// connection to the old process: the restarted peer's first message comes
// in on a new stream, and the answer to it must reach the new process, not
// vanish into the old connection until RetryInterval resends it (a home's
// reclaim after a restart waited 100 ms so) or the keepalive gives up.
func TestGRPCAnswersARestartedPeerOnANewConnection(t *testing.T) {
	a, b := newGRPCNode(t, "a", nil), newGRPCNode(t, "b", nil)
	defer closeAll(t, a.t)
	proxy := newHoldingProxy(t, b.self.Addr)
	bViaProxy := b.self
	bViaProxy.Addr = proxy.addr()

	require.NoError(t, a.t.Send(bViaProxy, numbered(a.self, "b", 0)))
	b.in.waitLen(t, 1, 5*time.Second)
	require.NoError(t, b.t.Send(a.self, numbered(b.self, "a", 0)))
	a.in.waitLen(t, 1, 5*time.Second)
	time.Sleep(100 * time.Millisecond) // the stream's header has come back

	b2 := newGRPCNode(t, "b", nil)
	defer closeAll(t, b2.t)
	proxy.hold(b2.self.Addr)
	require.NoError(t, b.t.Close())

	// The restarted peer speaks first; a answers through its address.
	require.NoError(t, b2.t.Send(a.self, numbered(b2.self, "a", 1)))
	a.in.waitLen(t, 2, 5*time.Second)
	require.NoError(t, a.t.Send(bViaProxy, numbered(a.self, "b", 1)))
	b2.in.waitLen(t, 1, 2*time.Second)
	require.Equal(t, uint64(1), b2.in.snapshot()[0].Body.(msg.Renewal).Nonce)
}

// Streams that come and go between two running processes never make the
// sender drop a working connection: only another process of the peer does.
func TestGRPCKeepsItsConnectionToAPeerThatDidNotRestart(t *testing.T) {
	a, b := newGRPCNode(t, "a", nil), newGRPCNode(t, "b", nil)
	defer closeAll(t, a.t, b.t)
	for i := range 20 {
		require.NoError(t, a.t.Send(b.self, numbered(a.self, "b", uint64(i))))
		b.in.waitLen(t, i+1, 5*time.Second)
		require.NoError(t, b.t.Send(a.self, numbered(b.self, "a", uint64(i))))
		a.in.waitLen(t, i+1, 5*time.Second)
	}
	require.Zero(t, a.t.Stats().Reconnects)
	require.Zero(t, b.t.Stats().Reconnects)
}

// The sender drops a stream only when both ends are known and differ: a
// peer of an earlier release sends no boot (heard 0) and answers with no
// header (reached 0), and a stream whose header has not come yet is kept.
func TestToGoneProcess(t *testing.T) {
	for _, c := range []struct {
		heard, reached uint64
		gone           bool
	}{
		{0, 0, false},
		{0, 7, false},
		{7, 0, false},
		{7, 7, false},
		{8, 7, true},
	} {
		p, st := &peer{}, &stream{}
		p.heard.Store(c.heard)
		st.remote.Store(c.reached)
		require.Equal(t, c.gone, p.leaveGoneProcess(st), "heard %d, reached %d", c.heard, c.reached)
		// Once: the sender redials, then writes on until it hears again.
		require.False(t, p.leaveGoneProcess(st), "heard %d, reached %d, a second time", c.heard, c.reached)
	}
}

// Two live processes under one node ID (an impostor, which the protocol
// refuses): a stream from the one this node does not send to makes its
// sender redial once, not before every write to the other.
func TestGRPCRedialsOnceForAnImpostor(t *testing.T) {
	a, b := newGRPCNode(t, "a", nil), newGRPCNode(t, "b", nil)
	impostor := newGRPCNode(t, "b", nil)
	defer closeAll(t, a.t, b.t, impostor.t)
	require.NoError(t, a.t.Send(b.self, numbered(a.self, "b", 0)))
	b.in.waitLen(t, 1, 5*time.Second)
	time.Sleep(100 * time.Millisecond) // the stream's header has come back
	require.NoError(t, impostor.t.Send(a.self, numbered(impostor.self, "a", 0)))
	a.in.waitLen(t, 1, 5*time.Second)
	for i := 1; i <= 50; i++ {
		require.NoError(t, a.t.Send(b.self, numbered(a.self, "b", uint64(i))))
		b.in.waitLen(t, i+1, 5*time.Second)
	}
	// One redial, the one the impostor's stream asked for.
	require.Equal(t, uint64(1), a.t.Stats().Reconnects)
}

func TestParseBoot(t *testing.T) {
	b := newBoot()
	require.NotZero(t, b)
	require.Equal(t, b, parseBoot([]string{formatBoot(b)}))
	for _, v := range [][]string{nil, {}, {"zz"}, {"1", "2"}, {"10000000000000000"}} {
		require.Zero(t, parseBoot(v), "%q", v)
	}
}

// FuzzParseBoot: any metadata value parses to a boot that formats and
// parses back to itself, or to 0.
func FuzzParseBoot(f *testing.F) {
	for _, s := range []string{"", "0", "1", "ffffffffffffffff", "10000000000000000", "-1", "0x10", "007"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := parseBoot([]string{s})
		if b != 0 && parseBoot([]string{formatBoot(b)}) != b {
			t.Fatalf("%q parsed to %x, which does not round-trip", s, b)
		}
	})
}

// Reached (H28): an address shows it reaches a node only when a stream of
// this node's to it is answered by the process that has a stream open to
// this node under that node's ID. Nothing sent yet, an address where
// nothing answers, another node's address, and a node that restarted since
// its address last answered all read false.
func TestGRPCReached(t *testing.T) {
	a, b, c := newGRPCNode(t, "a", nil), newGRPCNode(t, "b", nil), newGRPCNode(t, "c", nil)
	defer closeAll(t, a.t, c.t)
	reachedSoon := func(to msg.Member) bool {
		deadline := time.Now().Add(time.Second)
		for time.Now().Before(deadline) {
			if a.t.Reached(to) {
				return true
			}
			time.Sleep(10 * time.Millisecond)
		}
		return false
	}

	require.NoError(t, b.t.Send(a.self, numbered(b.self, "a", 0)))
	a.in.waitLen(t, 1, 5*time.Second)
	require.False(t, reachedSoon(b.self), "a has sent b nothing: its address is not shown")

	atC := b.self
	atC.Addr = c.self.Addr // b advertising c's address: c answers
	require.NoError(t, a.t.Send(atC, numbered(a.self, "b", 0)))
	c.in.waitLen(t, 1, 5*time.Second)
	require.False(t, reachedSoon(atC), "c's boot answered for b")

	deaf := b.self
	deaf.Addr = deafListener(t)
	require.NoError(t, a.t.Send(deaf, numbered(a.self, "b", 1)))
	require.False(t, reachedSoon(deaf), "an address where nothing answers")

	require.NoError(t, a.t.Send(b.self, numbered(a.self, "b", 2)))
	b.in.waitLen(t, 1, 5*time.Second)
	require.True(t, reachedSoon(b.self), "b answered at its address")
	require.False(t, a.t.Reached(atC), "only the address a sends to now")

	// b restarts at another port; its old address is no longer shown, and
	// its new one is once a has sent to it.
	require.NoError(t, b.t.Close())
	b2 := newGRPCNode(t, "b", nil)
	defer closeAll(t, b2.t)
	require.NoError(t, b2.t.Send(a.self, numbered(b2.self, "a", 1)))
	a.in.waitLen(t, 2, 5*time.Second)
	require.False(t, reachedSoon(b.self), "the old process's address, after the new one spoke")
	require.NoError(t, a.t.Send(b2.self, numbered(a.self, "b", 3)))
	b2.in.waitLen(t, 1, 5*time.Second)
	require.True(t, reachedSoon(b2.self), "the restarted b at its new address")
}

// deafListener is a loopback address that accepts connections into its
// backlog and never answers, bound until the test ends.
func deafListener(t *testing.T) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = lis.Close() })
	return lis.Addr().String()
}
