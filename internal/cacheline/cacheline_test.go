package cacheline

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// TestSliceOwnsItsLine: for the element sizes the shards use, the array is
// a line long and starts on a line boundary, every time.
func TestSliceOwnsItsLine(t *testing.T) {
	check := func(name string, size uintptr, capacity int, data unsafe.Pointer) {
		require.GreaterOrEqual(t, uintptr(capacity)*size, uintptr(Size), name)
		require.Zero(t, uintptr(data)%Size, "%s starts mid-line", name)
	}
	for range 16 {
		p := Slice[*int]()
		check("pointers", unsafe.Sizeof((*int)(nil)), cap(p), unsafe.Pointer(unsafe.SliceData(p)))
		u := Slice[uint32]()
		check("uint32", 4, cap(u), unsafe.Pointer(unsafe.SliceData(u)))
		s := Slice[[2]uint64]()
		check("16-byte", 16, cap(s), unsafe.Pointer(unsafe.SliceData(s)))
	}
	require.Equal(t, 1, cap(Slice[[100]byte]()), "an element over a line still gets room for one")
}
