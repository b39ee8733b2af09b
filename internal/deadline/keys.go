package deadline

import (
	"cmp"
	"slices"
)

// SortedKeys returns m's keys in order. The machines iterate their tables
// through it wherever an iteration emits messages or events, so that a run is
// a function of its inputs alone (same seed, same trace) and not of Go's
// randomised map order. Such iterations happen at membership and restart
// frequency, never on a lock's path.
func SortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
