package delegation

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/homelock/homelock/internal/cacheline"
)

// TestShardSlicesOwnTheirLines: the slices the fast path writes (the
// admitted sections and their free slots) start a cache line long and
// line-aligned, so that admissions on distinct shards on two cores do not
// contend for a line.
func TestShardSlicesOwnTheirLines(t *testing.T) {
	for i := range 16 {
		s := newShard()
		require.GreaterOrEqual(t, uintptr(cap(s.handles))*unsafe.Sizeof(handle{}), uintptr(cacheline.Size), "shard %d handles", i)
		require.Zero(t, uintptr(unsafe.Pointer(unsafe.SliceData(s.handles)))%cacheline.Size, "shard %d handles", i)
		require.GreaterOrEqual(t, cap(s.freeHandles)*4, cacheline.Size, "shard %d free handles", i)
		require.Zero(t, uintptr(unsafe.Pointer(unsafe.SliceData(s.freeHandles)))%cacheline.Size, "shard %d free handles", i)
	}
}
