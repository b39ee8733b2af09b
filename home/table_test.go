package home

import (
	"testing"
	"unsafe"

	"github.com/homelock/homelock/internal/zerotest"
)

// TestEntrySize holds the line on the home's share of an idle delegation. A
// home may keep a million; the budget for one, home and holder side together
// with their maps and timers, is 256 bytes (the harness's "heap per idle
// delegation"). An entry with its live delegation is 112 bytes, a malloc
// size class: a field more moves it to the next (128). Put what only a
// contended or moving key needs in entryExtra instead.
func TestEntrySize(t *testing.T) {
	if got := unsafe.Sizeof(entry{}); got > 112 {
		t.Errorf("entry is %d bytes, over its 112", got)
	}
}

// TestEntryExtraEmpty: empty must see every field of entryExtra, or the
// state in a field it misses would be dropped with the rest (trim).
func TestEntryExtraEmpty(t *testing.T) {
	if !new(entryExtra).empty() {
		t.Fatal("the zero entryExtra is not empty")
	}
	zerotest.EachField(t, func(field string, x *entryExtra) {
		if x.empty() {
			t.Errorf("entryExtra.empty misses field %s", field)
		}
	})
}
