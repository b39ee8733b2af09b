package outbuf

// MaxKept is the largest array, in elements, that Keep hands back.
const MaxKept = 1024

// Kept is what Keep remembers between steps: how many elements the last
// returned slice showed the caller.
type Kept struct{ readied int }

// Keep takes the slice a step returns and gives back its array emptied for
// the next step (nil when over MaxKept). The returned slice is good until
// the next call.
func Keep[T any](k *Kept, s []T) []T {
	if n := len(s); n < k.readied {
		clear(s[n:k.readied])
	}
	if cap(s) > MaxKept {
		k.readied = 0
		return nil
	}
	k.readied = len(s)
	return s[:0]
}
