package homelock

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/homelock/homelock/delegation"
	"github.com/homelock/homelock/transport"
)

func validConfig() Config {
	c := DefaultConfig()
	c.NodeID, c.ClusterID, c.DataDir = "n1", "c", "/tmp/x"
	c.Bootstrap, c.InitialMembers = true, []string{"n1"}
	return c
}

// Each violation is named with its field and value; several are all listed.
func TestValidate(t *testing.T) {
	require.NoError(t, validConfig().Validate())
	for name, tc := range map[string]struct {
		mut  func(*Config)
		want []string
	}{
		"no identity":      {func(c *Config) { c.NodeID, c.ClusterID, c.DataDir = "", "", "" }, []string{"NodeID is empty", "ClusterID is empty", "DataDir is empty"}},
		"epoch lease":      {func(c *Config) { c.EpochLease = 2 * time.Second; c.MaxLease = 5 * time.Second }, []string{"EpochLease (2s) must exceed MaxLease (5s) + Skew (250ms)"}},
		"skew":             {func(c *Config) { c.Skew = 10 * time.Millisecond }, []string{"Skew (10ms) must be at least 2 × MaxDrift (0.01) × max(EpochLease, MaxLease) + margin (5ms) = 125ms"}},
		"drift":            {func(c *Config) { c.MaxDrift = 0.5 }, []string{"MaxDrift (0.5) must be in [0, 0.1)"}},
		"durations":        {func(c *Config) { c.RetryInterval, c.DefaultWait = 0, -time.Second }, []string{"RetryInterval (0s) must be positive", "DefaultWait (-1s) must be positive"}},
		"min useful":       {func(c *Config) { c.MinUseful = time.Second }, []string{"MaxLease (2s) must exceed 2 × MinUseful (1s)"}},
		"retry":            {func(c *Config) { c.RetryInterval = 3 * time.Second }, []string{"RetryInterval (3s) must be below MaxLease (2s)"}},
		"bootstrap list":   {func(c *Config) { c.InitialMembers = []string{"n2", "n2"} }, []string{"InitialMembers (n2,n2) must include NodeID (\"n1\")", "repeated ID \"n2\""}},
		"bootstrap empty":  {func(c *Config) { c.InitialMembers = nil }, []string{"InitialMembers is empty but Bootstrap is set"}},
		"initial no boot":  {func(c *Config) { c.Bootstrap = false }, []string{"InitialMembers (n1) is set but Bootstrap is not"}},
		"addresses":        {func(c *Config) { c.GRPCAddr, c.GossipAddr, c.Join = "nope", "", []string{"x"} }, []string{"GRPCAddr (\"nope\") is not host:port", "GossipAddr is empty", "Join (\"x\") is not host:port"}},
		"gossip key":       {func(c *Config) { c.GossipKey = []byte("short") }, []string{"GossipKey (5 bytes) must be 16, 24 or 32 bytes"}},
		"accept keys":      {func(c *Config) { c.GossipAcceptKeys = [][]byte{[]byte("short")} }, []string{"GossipAcceptKeys[0] (5 bytes) must be 16, 24 or 32 bytes", "GossipAcceptKeys need a GossipKey"}},
		"plaintext no key": {func(c *Config) { c.GossipPlaintext = transport.PlaintextSent }, []string{"GossipPlaintext send needs a GossipKey"}},
		"plaintext range":  {func(c *Config) { c.GossipPlaintext = 7 }, []string{"GossipPlaintext (7) is not one of refuse, accept or send"}},
		"key ring twice":   {func(c *Config) { c.KeyRing = testKeyRing(t); c.KeyRingFile = "k.json" }, []string{"KeyRing and KeyRingFile (\"k.json\") are both set"}},
		"caps":             {func(c *Config) { c.MaxDelegations = -1 }, []string{"MaxDelegations (-1) must not be negative"}},
		"grant operation":  {func(c *Config) { c.GrantOperation = "" }, []string{"GrantOperation (\"\") must be 1 to 256 bytes"}},
		"negative skew":    {func(c *Config) { c.Skew = -time.Millisecond }, []string{"Skew (-1ms) must not be negative"}},
		"node ID too long": {func(c *Config) { c.NodeID = string(make([]byte, 300)) }, []string{"NodeID (300 bytes) must be at most 256 bytes"}},
	} {
		t.Run(name, func(t *testing.T) {
			c := validConfig()
			tc.mut(&c)
			err := c.Validate()
			require.ErrorIs(t, err, ErrInvalidConfig)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

// Push/pull, which repairs what gossip failed to tell a member, runs at
// least twice per DownAfter, or a new member could be counted down and
// removed before it is repaired.
func TestGossipTimingsPushPull(t *testing.T) {
	fast := transport.FastTimings()
	off := fast
	off.PushPullInterval = 0
	for name, tc := range map[string]struct {
		set       transport.Timings
		downAfter time.Duration
		want      time.Duration
	}{
		"LAN defaults, held to DownAfter/2": {transport.Timings{}, 10 * time.Second, 5 * time.Second},
		"LAN defaults, long DownAfter":      {transport.Timings{}, time.Minute, transport.LocalTimings().PushPullInterval},
		"set, held to DownAfter/2":          {fast, 500 * time.Millisecond, 250 * time.Millisecond},
		"set, within DownAfter/2":           {fast, 10 * time.Second, fast.PushPullInterval},
		"set off":                           {off, 10 * time.Second, 5 * time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			c := DefaultConfig()
			c.GossipTimings, c.DownAfter = tc.set, tc.downAfter
			got := c.gossipTimings()
			require.Equal(t, tc.want, got.PushPullInterval)
			want := tc.set
			if want == (transport.Timings{}) {
				want = transport.LocalTimings()
			}
			want.PushPullInterval = tc.want
			require.Equal(t, want, got, "the other timings as set")
		})
	}
}

func TestOpenRefusesInvalidConfig(t *testing.T) {
	_, err := Open(context.Background(), Config{})
	require.ErrorIs(t, err, ErrInvalidConfig)

	c := testConfig(t, "n1") // no Bootstrap, no Join, empty directory
	_, err = Open(context.Background(), c)
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.Contains(t, err.Error(), "set Bootstrap")
}

func TestOptions(t *testing.T) {
	n := &Node{cfg: validConfig()}
	o, err := n.options(nil)
	require.NoError(t, err)
	require.Equal(t, lockOptions{wait: n.cfg.DefaultWait, scope: ScopeCluster}, o)

	o, err = n.options([]LockOption{WithLease(time.Second), WithWait(2 * time.Second), WithScope(ScopeNode), WithHomeSilence(300 * time.Millisecond)})
	require.NoError(t, err)
	require.Equal(t, lockOptions{lease: time.Second, wait: 2 * time.Second, silent: 300 * time.Millisecond, waitSet: true, scope: ScopeNode}, o)

	for _, bad := range []LockOption{WithLease(0), WithWait(-1), WithScope(9), WithHomeSilence(0), WithHomeSilence(-time.Second)} {
		_, err := n.options([]LockOption{bad})
		require.ErrorIs(t, err, errBadOption)
	}
}

// Failed events become the exported errors, wrapped with key and detail.
func TestFailureWrapping(t *testing.T) {
	for reason, want := range map[delegation.Reason]error{
		delegation.ReasonTimeout:      ErrTimeout,
		delegation.ReasonUnavailable:  ErrLockUnavailable,
		delegation.ReasonTooMany:      ErrTooManyDelegations,
		delegation.ReasonHookFailed:   ErrHookFailed,
		delegation.ReasonLeaseExpired: ErrLeaseExpired,
	} {
		err := failure(delegation.Event{Kind: delegation.Failed, Key: "users/7", Reason: reason, Detail: "home n2 refused"})
		require.ErrorIs(t, err, want)
		require.Equal(t, fmt.Sprintf("%v: key %q: home n2 refused", want, "users/7"), err.Error())
		for _, other := range []error{ErrTimeout, ErrLockUnavailable, ErrTooManyDelegations, ErrHookFailed, ErrLeaseExpired} {
			if other != want {
				require.False(t, errors.Is(err, other))
			}
		}
	}
	require.ErrorIs(t, ErrStaleOwner, ErrStaleOwner)
}

// Node-scope locks exclude on one node and carry the node-scope marker.
func TestNodeScope(t *testing.T) {
	c := newCluster(t, 1, nil)
	n := c.nodes[0]
	ctx := context.Background()
	h, err := n.Lock(ctx, "k", WithScope(ScopeNode))
	require.NoError(t, err)
	require.Equal(t, ScopeNode, h.Scope())
	require.Zero(t, h.Token().Epoch)
	g, err := n.KeyRing().Verify(h.Grant())
	require.NoError(t, err)
	require.Equal(t, ScopeNode, g.Scope)
	_, err = n.TryLock(ctx, "k", WithScope(ScopeNode))
	require.ErrorIs(t, err, ErrTimeout)
	require.NoError(t, h.Unlock())
	h, err = n.TryLock(ctx, "k", WithScope(ScopeNode), WithLease(30*time.Millisecond))
	require.NoError(t, err)
	<-h.Done()
	require.ErrorIs(t, h.Valid(), ErrLeaseExpired)
	require.ErrorContains(t, h.Valid(), "lost: its lease ran out")
}

// LockAll takes keys in one order and gives back sorted, deduplicated handles.
func TestLockAll(t *testing.T) {
	n := readyNode(t)
	hs, err := n.LockAll(context.Background(), "b", "a", "b", "c")
	require.NoError(t, err)
	require.Len(t, hs, 3)
	for i, k := range []string{"a", "b", "c"} {
		require.Equal(t, k, hs[i].Key())
		require.NoError(t, hs[i].Unlock())
	}
}
