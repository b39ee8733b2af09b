package harness

import (
	"testing"
	"time"

	"github.com/homelock/homelock/fence"
)

func TestHandoffParts(t *testing.T) {
	at := func(us int) time.Time { return time.Unix(0, 0).Add(time.Duration(us) * time.Microsecond) }
	tok := func(c uint64) fence.Token { return fence.Token{Epoch: 1, Incarnation: 1, Counter: c} }
	for _, tc := range []struct {
		name          string
		spans         map[fence.Token]span
		wantHold, gap float64
	}{
		{"one grant", map[fence.Token]span{tok(1): {at(0), at(100)}}, 100, 0},
		{
			// Grants in token order, not map order: 1 [0,100], 2 [150,250],
			// 3 [400,500]; gaps {50, 150}.
			"gaps follow token order",
			map[fence.Token]span{tok(3): {at(400), at(500)}, tok(1): {at(0), at(100)}, tok(2): {at(150), at(250)}},
			100, 50,
		},
		{
			// Two critical sections under one grant count as one span.
			"a grant with two critical sections",
			map[fence.Token]span{tok(1): span{}.add(at(0), at(40)).add(at(50), at(300)), tok(2): {at(310), at(320)}},
			10, 10, // holds {300, 10}: the p50 of two values is the lower
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hold, gap := handoffParts(tc.spans)
			if hold != tc.wantHold {
				t.Errorf("hold p50 = %v µs, want %v", hold, tc.wantHold)
			}
			if gap != tc.gap {
				t.Errorf("gap p50 = %v µs, want %v", gap, tc.gap)
			}
		})
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{nil, -1}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
