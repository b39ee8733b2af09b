package harness

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/homelock/homelock/fence"
)

// TestKeyCheck: the soak's checker flags a section admitted while an
// earlier one's handle is still valid, and a token that does not grow; a
// section whose lock ended (a killed node's) may be overtaken.
func TestKeyCheck(t *testing.T) {
	valid := func() error { return nil }
	ended := func() error { return errors.New("lease ran out") }
	tok := func(c, s uint64) fence.Token { return fence.Token{Epoch: 1, Incarnation: 1, Counter: c, Section: s} }
	for _, tc := range []struct {
		name     string
		first    *section
		exitIt   bool // the first section ends before the second enters
		second   *section
		violates string
	}{
		{name: "one after the other", first: &section{"n1", tok(1, 1), valid}, exitIt: true, second: &section{"n2", tok(2, 1), valid}},
		{name: "the first's lock ended (its node killed)", first: &section{"n1", tok(1, 1), ended}, second: &section{"n2", tok(2, 1), valid}},
		{name: "two valid at once", first: &section{"n1", tok(1, 1), valid}, second: &section{"n2", tok(2, 1), valid}, violates: "still valid"},
		{name: "a token that did not grow", first: &section{"n1", tok(2, 1), valid}, exitIt: true, second: &section{"n2", tok(1, 5), valid}, violates: "not above"},
		{name: "the same token twice", first: &section{"n1", tok(2, 1), valid}, exitIt: true, second: &section{"n1", tok(2, 1), valid}, violates: "not above"},
		{name: "the next section of one delegation", first: &section{"n1", tok(2, 1), valid}, exitIt: true, second: &section{"n1", tok(2, 2), valid}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var k keyCheck
			require.Empty(t, k.enter(tc.first))
			if tc.exitIt {
				k.exit(tc.first)
			}
			v := k.enter(tc.second)
			if tc.violates == "" {
				require.Empty(t, v)
			} else {
				require.Contains(t, v, tc.violates)
			}
		})
	}
}

// TestSoakShort runs the soak briefly on a real loopback cluster: a kill
// and a restart (seed 3's first fault, after about a second), the checks
// on, no violation.
func TestSoakShort(t *testing.T) {
	if testing.Short() {
		t.Skip("a real cluster for about 15 s (-short)")
	}
	o := DefaultSoakOptions()
	o.Duration, o.FaultEvery, o.Seed, o.Keys = 8*time.Second, time.Second, 3, 4
	o.Progress = func(e string) { t.Log(e) }
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := Soak(ctx, o)
	require.NoError(t, err)
	require.Empty(t, r.Violations)
	require.Positive(t, r.Faults["kill"], "no kill ran: faults %v", r.Faults)
	require.Positive(t, r.HealMaxMs, "no heal measured")
	require.Positive(t, r.Sections)
	require.Zero(t, r.WouldRefuse)
}
