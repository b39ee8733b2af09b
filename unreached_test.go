package homelock

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestJoinerAtAnUnreachableAddress: a fourth node advertises a transport
// address that does not reach it, one where nothing answers or n1's own.
// Its Joins reach the members over its own connections, but the members
// let it in only once its address answers as it (H28), so it is never a
// member and every key stays lockable. Both sides say so: a member it
// keeps asking reports it unreached (and logs it), and its own phase says
// that nobody answers and names the address to check.
func TestJoinerAtAnUnreachableAddress(t *testing.T) {
	for _, tc := range []struct {
		name string
		addr func(t *testing.T, c *cluster) string
	}{
		{"nothing answers", func(t *testing.T, _ *cluster) string { return deafAddr(t) }},
		{"another node answers", func(_ *testing.T, c *cluster) string { return c.nodes[0].self.Addr }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 3, nil)
			c.waitAvailable()
			cfg := testConfig(t, "n4")
			cfg.KeyRing = c.cfgs[0].KeyRing
			cfg.Join = []string{c.cfgs[0].GossipAddr}
			cfg.AdvertiseAddr = tc.addr(t, c)
			started := make(chan *Node, 1)
			cfg.Started = func(n *Node) { started <- n }
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			opened := make(chan error, 1)
			go func() {
				n, err := Open(ctx, cfg)
				if n != nil {
					_ = n.Close(killed())
				}
				opened <- err
			}()
			n4 := <-started
			// The joiner asks the members in turn (which ones, gossip
			// decides); one that it keeps asking reports it. No member's
			// epoch ever has it.
			var admitted string
			reported := func() bool {
				found := false
				for _, m := range c.nodes {
					m.mu.Lock()
					u := m.core.Unreached(m.clock.Now())
					l, _ := m.core.Current()
					m.mu.Unlock()
					if _, in := l.Epoch.Member("n4"); in {
						admitted = fmt.Sprintf("%s's epoch %d has n4", m.ID(), l.Epoch.Number)
						return true
					}
					found = found || len(u) == 1 && u[0].ID == "n4" && u[0].Addr == cfg.AdvertiseAddr
				}
				return found
			}
			require.Eventually(t, reported, 18*time.Second, 50*time.Millisecond, "no member reported n4 unreached")
			require.Empty(t, admitted)
			phase := n4.Status().Phase
			require.True(t, strings.Contains(phase, "no answer from any node") && strings.Contains(phase, cfg.AdvertiseAddr), "n4's phase: %q", phase)
			for k := range 20 {
				lctx, lcancel := context.WithTimeout(context.Background(), 2*time.Second)
				h, err := c.nodes[0].Lock(lctx, fmt.Sprintf("key-%d", k))
				lcancel()
				require.NoError(t, err, "key-%d through n1 while n4 asks to join", k)
				require.NoError(t, h.Unlock())
			}
			cancel()
			require.Error(t, <-opened, "n4 learned an epoch it cannot have heard of")
		})
	}
}

// deafAddr is a loopback address where a listener accepts into its backlog
// and nothing ever answers. It stays bound until the test ends: a port only
// closed again could be the very one n4's transport is given next, and n4
// would then be reachable after all.
func deafAddr(t *testing.T) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = lis.Close() })
	return lis.Addr().String()
}

// TestBootstrapWaitsForAnUnreachableInitialMember: n3 of a first start
// advertises an address where nothing answers. The initial members do not
// form the first epoch with it (its keys would answer nobody, H28): each
// waits and names the address, and n3's own Open fails. Started again at
// its right address, with the same data directory, n3 is answered and the
// three form the cluster.
func TestBootstrapWaitsForAnUnreachableInitialMember(t *testing.T) {
	cfgs := bootstrapConfigs(t, 3, nil)
	bad := cfgs[2]
	bad.AdvertiseAddr = deafAddr(t)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nodes := make([]*Node, 3)
	opened := make(chan error, 3)
	starting := make(chan *Node, 3)
	for i := range 2 {
		cfg := cfgs[i]
		cfg.Started = func(n *Node) { starting <- n }
		go func() {
			n, err := Open(ctx, cfg)
			nodes[i] = n
			opened <- err
		}()
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			if n != nil {
				_ = n.Close(killed())
			}
		}
	})
	early := []*Node{<-starting, <-starting}

	badCtx, badCancel := context.WithTimeout(ctx, 4*time.Second)
	defer badCancel()
	n3, err := Open(badCtx, bad)
	if n3 != nil {
		_ = n3.Close(killed())
	}
	require.Error(t, err, "n3 formed a cluster it cannot be reached in")
	for _, n := range early {
		phase := n.Status().Phase
		require.True(t, strings.Contains(phase, "waiting for an answer from n3 at "+bad.AdvertiseAddr), "%s's phase: %q", n.ID(), phase)
		n.mu.Lock()
		l, learned := n.core.Current()
		n.mu.Unlock()
		require.False(t, learned, "%s learned epoch %d with n3 unreachable", n.ID(), l.Epoch.Number)
	}

	n3, err = Open(ctx, cfgs[2])
	require.NoError(t, err, "n3 at its right address")
	nodes[2] = n3
	for range 2 {
		require.NoError(t, <-opened)
	}
	c := &cluster{t: t, cfgs: cfgs, nodes: nodes}
	c.waitAvailable()
	for _, n := range nodes {
		st := n.Status()
		require.Len(t, st.Members, 3, "%s", n.ID())
	}
}
