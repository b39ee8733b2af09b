package fence

import (
	"fmt"
	"testing"
)

// TestOpFilterFalsePositives: every key added is found (a false negative
// would let an operation apply twice, F7), at every size down to one block,
// and at the default's design load (about 9.8 bits a key) the false
// positives stay near the 1.1% DefaultOpIndexBytes promises. The first two
// sizes are overfull on purpose: they check only that nothing added is lost.
func TestOpFilterFalsePositives(t *testing.T) {
	for _, c := range []struct {
		bytes, keys int
		maxRate     float64
	}{
		{64, 40, 1},              // one block
		{256, 200, 1},            // the crash tests' size
		{64 << 10, 53_500, 0.02}, // the default's bits a key, smaller
		{DefaultOpIndexBytes, 1_700_000, 0.02},
	} {
		t.Run(fmt.Sprint(c.bytes), func(t *testing.T) {
			if c.keys > 100_000 && testing.Short() {
				t.Skip("the default size's design load")
			}
			f := newOpFilter(c.bytes)
			key := func(i int) []byte { return fmt.Appendf(nil, "res/op-%d", i) }
			for i := range c.keys {
				f.add(key(i))
			}
			for i := range c.keys {
				must.True(t, f.mayContain(key(i)), "key %d added but not found", i)
			}
			const probes = 100_000
			fp := 0
			for i := c.keys; i < c.keys+probes; i++ {
				if f.mayContain(key(i)) {
					fp++
				}
			}
			rate := float64(fp) / probes
			t.Logf("%d bytes, %d keys: %.2f%% false positives", c.bytes, c.keys, 100*rate)
			must.True(t, rate <= c.maxRate, "false-positive rate %.3f over %.3f", rate, c.maxRate)
		})
	}
}
