package delegation

import (
	"testing"
	"unsafe"

	"github.com/homelock/homelock/internal/zerotest"
)

// TestKeyStateSize holds the line on the holder's share of an idle
// delegation. A node may hold a million; the budget for one, home and
// holder side together with their maps and timers, is 256 bytes (the
// harness's "heap per idle delegation"). The holder's state is 96 bytes, a
// malloc size class: a field more moves it to the next (112). Put what only
// a key in motion needs in keyExtra instead.
func TestKeyStateSize(t *testing.T) {
	if got := unsafe.Sizeof(keyState{}); got > 96 {
		t.Errorf("keyState is %d bytes, over its 96", got)
	}
}

// TestKeyExtraEmpty: empty must see every field of keyExtra, or the state
// in a field it misses would be dropped with the rest (trim).
func TestKeyExtraEmpty(t *testing.T) {
	if !new(keyExtra).empty() {
		t.Fatal("the zero keyExtra is not empty")
	}
	zerotest.EachField(t, func(field string, x *keyExtra) {
		if x.empty() {
			t.Errorf("keyExtra.empty misses field %s", field)
		}
	})
}
