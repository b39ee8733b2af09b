package homelock

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// counterFailFS fails every write and sync of a store's counter file while
// fail is set: a store write whose error comes back (rather than crashing
// the process, as Pebble's own log failures do).
type counterFailFS struct {
	vfs.FS
	fail *atomic.Bool
}

func (f counterFailFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	file, err := f.FS.OpenReadWrite(name, c, opts...)
	if err != nil || !strings.HasSuffix(name, "HOMELOCK-COUNTER") {
		return file, err
	}
	return counterFailFile{file, f.fail}, nil
}

type counterFailFile struct {
	vfs.File
	fail *atomic.Bool
}

var errCounterDisk = errors.New("counter disk failed")

func (f counterFailFile) WriteAt(p []byte, off int64) (int, error) {
	if f.fail.Load() {
		return 0, errCounterDisk
	}
	return f.File.WriteAt(p, off)
}

func (f counterFailFile) SyncData() error {
	if f.fail.Load() {
		return errCounterDisk
	}
	return f.File.SyncData()
}

// A node whose store refuses a write stops taking part, and it must look
// down to the others too, as a crashed one would: alive in gossip, it kept
// every key it was home for unavailable until someone restarted it.
func TestStoreFailureTakesNodeOut(t *testing.T) {
	var fail atomic.Bool
	c := newCluster(t, 4, func(cfg *Config) {
		if cfg.NodeID == "n4" {
			cfg.FS = counterFailFS{vfs.Default, &fail}
		}
	})
	c.waitAvailable()
	require.NoError(t, c.nodes[3].Err())
	ctx := context.Background()
	key := c.keyHomedAt(3, "failed")
	h, err := c.nodes[0].Lock(ctx, key)
	require.NoError(t, err)
	require.NoError(t, h.Unlock())
	held, err := c.nodes[3].Lock(ctx, c.keyHomedAt(0, "held"))
	require.NoError(t, err)

	// n3 leaves: the epoch without it is a write on n4, which fails.
	fail.Store(true)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, c.nodes[2].Close(cctx))
	c.nodes[2] = nil
	deadline := time.Now().Add(15 * time.Second)
	for c.nodes[3].Err() == nil {
		require.True(t, time.Now().Before(deadline), "n4 never hit its store failure: %+v", c.nodes[3].Status())
		time.Sleep(20 * time.Millisecond)
	}
	require.ErrorIs(t, c.nodes[3].Err(), ErrStoreFailed)
	require.ErrorIs(t, c.nodes[3].Err(), errCounterDisk)
	require.Contains(t, c.nodes[3].Status().Reason, "store failed")
	<-held.Done()
	require.ErrorContains(t, held.Valid(), "lost: the node's store failed: ")
	require.ErrorContains(t, held.Valid(), errCounterDisk.Error())
	_, err = c.nodes[3].Lock(ctx, key)
	require.ErrorIs(t, err, ErrClosed)
	require.NoError(t, c.nodes[0].Err())
	for {
		lctx, cancel := context.WithTimeout(ctx, time.Second)
		h, err = c.nodes[0].Lock(lctx, key)
		cancel()
		if err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "%s, homed at the failed n4, still unavailable through n1: %v; n1 %+v", key, err, c.nodes[0].Status())
	}
	require.NotEqual(t, 3, c.homeOf(key))
	require.NoError(t, h.Unlock())
}
