package dtoken

import (
	"testing"

	"github.com/homelock/homelock/fence"
)

func TestIs(t *testing.T) {
	d := T{Epoch: 3, Incarnation: 2, Counter: 9}
	for _, tc := range []struct {
		tok  fence.Token
		want bool
	}{
		{fence.Token{Epoch: 3, Incarnation: 2, Counter: 9}, true},
		{fence.Token{Epoch: 3, Incarnation: 2, Counter: 9, Section: 1}, false}, // a section is not its delegation
		{fence.Token{Epoch: 3, Incarnation: 2, Counter: 8}, false},
		{fence.Token{}, false},
	} {
		if got := d.Is(tc.tok); got != tc.want {
			t.Errorf("%s.Is(%s) = %v", d, tc.tok, got)
		}
	}
	if got := d.Section(4); got.Delegation() != d.Token() || got.Section != 4 || Of(got) != d {
		t.Errorf("Section(4) = %s", got)
	}
	if !(T{}).IsZero() || d.IsZero() {
		t.Error("IsZero")
	}
}
