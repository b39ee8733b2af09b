package core

import (
	"testing"

	"github.com/homelock/homelock/msg"
)

// TestKeepArray: flush keeps the messages' array for the next step, clears
// what an earlier step returned beyond what the caller now reads, and drops
// an array too large to hold for good.
func TestKeepArray(t *testing.T) {
	out := func(n, c int) []Outgoing {
		s := make([]Outgoing, n, c)
		for i := range s {
			s[i].Env.Body = msg.Recall{Key: "k"}
		}
		return s
	}
	for _, tc := range []struct {
		name             string
		len, cap, before int
		kept             bool
	}{
		{"fewer than last step", 1, 8, 5, true},
		{"more than last step", 6, 8, 2, true},
		{"none", 0, 8, 3, true},
		{"over the bound", 2, maxKept + 1, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msgs := out(tc.cap, tc.cap)[:tc.len]
			next, readied := keepArray(msgs, tc.before)
			if !tc.kept {
				if next != nil || readied != 0 {
					t.Fatalf("kept an array of %d", cap(next))
				}
				return
			}
			if len(next) != 0 || cap(next) != tc.cap || readied != tc.len {
				t.Fatalf("kept len %d cap %d readied %d, want 0, %d, %d", len(next), cap(next), readied, tc.cap, tc.len)
			}
			all := next[:tc.cap]
			for i := range all {
				stale := i >= tc.len && i < tc.before
				if cleared := all[i].Env.Body == nil; cleared != stale {
					t.Fatalf("element %d cleared %v, want %v", i, cleared, stale)
				}
			}
		})
	}
}
