package homelock

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/homelock/homelock/localstore"
)

// openSingle bootstraps a one-node cluster from cfg and kills it when the
// test ends (unless the test closed it).
func openSingle(t *testing.T, cfg Config) *Node {
	t.Helper()
	cfg.Bootstrap, cfg.InitialMembers = true, []string{cfg.NodeID}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	n, err := Open(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close(killed()) })
	return n
}

// occupied returns a loopback address whose TCP port stays taken until the
// test ends.
func occupied(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l.Addr().String()
}

// A start that fails on a port in use fails clearly and leaves no store
// behind when it created one (the next start, on a free port, is a clean
// first start), but never removes a store that was there before.
func TestFailedStartLeavesNoStore(t *testing.T) {
	for _, port := range []string{"grpc", "gossip"} {
		t.Run(port, func(t *testing.T) {
			cfg := testConfig(t, "n1")
			cfg.DataDir = filepath.Join(t.TempDir(), "var", "n1")
			cfg.Bootstrap, cfg.InitialMembers = true, []string{"n1"}
			bad := cfg
			want := "start gRPC transport"
			if port == "grpc" {
				bad.GRPCAddr = occupied(t)
			} else {
				bad.GossipAddr, want = occupied(t), "start memberlist"
			}

			_, err := Open(context.Background(), bad)
			require.ErrorContains(t, err, want)
			_, statErr := os.Stat(filepath.Dir(cfg.DataDir))
			require.ErrorIs(t, statErr, fs.ErrNotExist, "the failed start left its data dir behind")

			n := openSingle(t, cfg)
			store := n.Store().Identity().StoreID
			require.NoError(t, n.Close(killed()))

			_, err = Open(context.Background(), bad)
			require.ErrorContains(t, err, want)
			n = openSingle(t, cfg)
			require.Equal(t, store, n.Store().Identity().StoreID, "a failed restart must keep the store")
			require.Equal(t, uint64(3), n.Incarnation(), "the failed restart's bump is kept too")
		})
	}
}

// A second node on a data dir in use fails at once, names the holder, and
// leaves the running node's store alone.
func TestOpenDataDirInUse(t *testing.T) {
	cfg := testConfig(t, "n1")
	n := openSingle(t, cfg)
	second := testConfig(t, "n1")
	second.DataDir, second.Bootstrap, second.InitialMembers = cfg.DataDir, true, []string{"n1"}
	_, err := Open(context.Background(), second)
	require.ErrorIs(t, err, localstore.ErrDataDirInUse)
	require.ErrorContains(t, err, "is in use by another homelock node (pid ")
	require.NoError(t, n.Close(killed()))
	n = openSingle(t, cfg)
	require.Equal(t, uint64(2), n.Incarnation())
}

// A node whose WAL lost its second half (synced writes: the epoch it
// learned, its gate marker) refuses to start rather than start with older
// state, and says what to do.
func TestOpenRefusesTruncatedWAL(t *testing.T) {
	cfg := testConfig(t, "n1")
	n := openSingle(t, cfg)
	require.NoError(t, n.Close(killed()))

	entries, err := os.ReadDir(cfg.DataDir)
	require.NoError(t, err)
	var wals []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".log") {
			wals = append(wals, filepath.Join(cfg.DataDir, e.Name()))
		}
	}
	require.NotEmpty(t, wals)
	slices.Sort(wals)
	wal := wals[len(wals)-1]
	b, err := os.ReadFile(wal)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(wal, b[:len(b)/2], 0o644))

	cfg.Bootstrap, cfg.InitialMembers = true, []string{"n1"}
	for range 2 {
		_, err = Open(context.Background(), cfg)
		require.ErrorIs(t, err, localstore.ErrCorrupt)
		require.ErrorContains(t, err, "lost synced writes")
		require.ErrorContains(t, err, "restore the directory")
		require.False(t, errors.Is(err, localstore.ErrDataDirInUse))
	}
	_, err = os.Stat(cfg.DataDir)
	require.NoError(t, err, "a refused store is never removed")
}

// Status answers from the moment Started runs (homelock node serves it from
// there), so a new node's first answer already says what it waits for; it
// used to say "not a member and not asking to join (left)" until the first
// bootstrap or join step ran.
func TestFirstStatusSaysWhatANewNodeWaitsFor(t *testing.T) {
	for name, tc := range map[string]struct {
		set  func(*Config)
		want string
	}{
		"bootstrap": {func(c *Config) { c.Bootstrap, c.InitialMembers = true, []string{"n1", "n2"} }, "bootstrapping: waiting for n2 in gossip"},
		"join":      {func(c *Config) { c.Join = []string{occupied(t)} }, "joining: no member alive in gossip yet"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig(t, "n1")
			tc.set(&cfg)
			var first string
			cfg.Started = func(n *Node) { first = n.Status().Phase }
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			_, err := Open(ctx, cfg)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.Equal(t, tc.want, first)
		})
	}
}
