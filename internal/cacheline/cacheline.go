package cacheline

import "unsafe"

// Size is the cache line size of the usual hosts (amd64, arm64).
const Size = 64

// Pad is a field that keeps what follows it off the line of what precedes.
type Pad [Size]byte

// Slice returns an empty slice whose array fills at least one line. Go's
// allocator places objects of the 64-byte size class (and of the larger
// powers of two that append grows it to) at line boundaries, so the array
// shares its line with no other object.
func Slice[T any]() []T {
	var zero T
	return make([]T, 0, max(1, Size/int(unsafe.Sizeof(zero))))
}
