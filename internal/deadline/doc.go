// Package deadline is a min-heap of per-key wake-ups for the pure state
// machines: they keep their timers as data and the driver asks for the next
// deadline, so virtual and real time drive the same code.
//
// A key has at most one entry: adding a key again moves its wake-up earlier
// or does nothing. (An earlier version kept every wake-up and let stale ones
// fire spuriously; under a hot key's churn they piled up by the hundred
// thousand and a Tick never ended.) The machines still re-check a key when
// it wakes, so a wake-up that comes early is harmless.
//
// The heap is intrusive: it holds pointers to the machines' per-key states,
// each of which keeps its own position, so a wake-up costs a heap slot and
// four bytes in the state, not a map entry and a copy of the key. A node
// holding a million idle delegations keeps a million wake-ups on each side.
package deadline
