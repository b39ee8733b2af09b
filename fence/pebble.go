package fence

import (
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
)

// UseBloomFilters sets a Bloom filter (10 bits per key) on every level of o
// and returns o. Every new operation ID makes the Guard look up a key that is
// not there; without filters that lookup reads and decompresses a block of
// every sstable it could be in, which profiles of a Guard-backed store show as
// the larger part of its CPU.
func UseBloomFilters(o *pebble.Options) *pebble.Options {
	for i := range o.Levels {
		o.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	return o
}
