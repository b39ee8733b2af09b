package homelock

import (
	"testing"
	"unsafe"
)

// TestHandleSize: the Handle is the repeat path's one allocation, 128 bytes,
// a malloc size class; a field more moves it to the next (144).
func TestHandleSize(t *testing.T) {
	if got := unsafe.Sizeof(Handle{}); got > 128 {
		t.Errorf("Handle is %d bytes, over its 128", got)
	}
}
