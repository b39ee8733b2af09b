package homelock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/homelock/homelock/msg"
	"github.com/homelock/homelock/transport"
)

// TestForgedVersionRefused: n3 runs this build's protocol version v while n1
// and n2 run v+1 (here v1 and v2 stand for them). A
// requester that sends as n3 but claims v2 in its messages (it forges the
// version, it does not run v2) is refused by the home, which checks the
// version the epoch records for n3, not the one the message claims; it is
// granted nothing. Through the in-memory transport, so the forged envelope
// crosses the same wire format as any other.
func TestForgedVersionRefused(t *testing.T) {
	net := transport.NewNetwork(transport.NetworkConfig{Seed: 7})
	t.Cleanup(func() { net.Close() })
	c := newCluster(t, 3, func(cfg *Config) {
		cfg.Transport = func(self msg.Member, h transport.Handler) (transport.Transport, error) {
			return net.Endpoint(self, h)
		}
		if cfg.NodeID != "n3" {
			cfg.version = ProtocolVersion + 1
		}
	})
	home := c.nodes[0]
	require.Eventually(t, func() bool { return version(home, "n3") == ProtocolVersion && version(home, "n1") == ProtocolVersion+1 },
		10*time.Second, 10*time.Millisecond, "the epoch never recorded n3 at v1 and n1 at v2")

	home.mu.Lock()
	l, ok := home.core.Current()
	home.mu.Unlock()
	require.True(t, ok)
	n3, _ := l.Epoch.Member("n3")
	n1, _ := l.Epoch.Member("n1")
	key := c.keyHomedAt(0, "forged")

	forger, err := net.Endpoint(msg.Member{ID: "forger", Store: 99, Version: ProtocolVersion + 1}, func(msg.Envelope) {})
	require.NoError(t, err)
	defer forger.Close()
	forged := n3
	forged.Version = ProtocolVersion + 1
	before := home.Stats()
	require.NoError(t, forger.Send(n1, msg.Envelope{
		From: forged, FromInc: 1, To: "n1", Epoch: l.Epoch.Number, Digest: l.Epoch.Digest(), Version: ProtocolVersion + 1,
		Body: msg.Acquire{Key: key, Req: msg.RequestID{Inc: 1, Seq: 1 << 40}, Attempt: 1},
	}))
	require.Eventually(t, func() bool { return home.Stats().Refused > before.Refused },
		5*time.Second, 5*time.Millisecond, "the home never refused the forged request")
	after := home.Stats()
	require.Equal(t, before.Grants, after.Grants, "the home granted the forged request")
	require.Equal(t, before.Refused+1, after.Refused)
}
