package outbuf

import "testing"

// TestKeep: the array comes back empty for the next step, what an earlier
// step showed beyond what the caller now reads is cleared, and an array too
// large to hold for good is dropped.
func TestKeep(t *testing.T) {
	filled := func(n, c int) []*int {
		s := make([]*int, n, c)
		for i := range s {
			s[i] = new(int)
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
		{"over the bound", 2, MaxKept + 1, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := Kept{readied: tc.before}
			next := Keep(&k, filled(tc.cap, tc.cap)[:tc.len])
			if !tc.kept {
				if next != nil || k.readied != 0 {
					t.Fatalf("kept an array of %d (readied %d)", cap(next), k.readied)
				}
				return
			}
			if len(next) != 0 || cap(next) != tc.cap || k.readied != tc.len {
				t.Fatalf("kept len %d cap %d readied %d, want 0, %d, %d", len(next), cap(next), k.readied, tc.cap, tc.len)
			}
			for i, p := range next[:tc.cap] {
				stale := i >= tc.len && i < tc.before
				if cleared := p == nil; cleared != stale {
					t.Fatalf("element %d cleared %v, want %v", i, cleared, stale)
				}
			}
		})
	}
}
