//go:build !homelock_mutations

package mutations

// Enabled reports whether the mutation switches are compiled in.
const Enabled = false
