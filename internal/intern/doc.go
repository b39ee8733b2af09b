// Package intern shares values that many per-key states name: what a
// million delegations have in common (the epoch and home incarnation of
// their tokens, the home that issued them, at a home the holder as one of
// its incarnations) is kept once, and each state keeps a four-byte ID
// instead of its own copy.
//
// A Table counts references and forgets a value whose last reference went
// when the next new value is made (its ID is then reused), so values that fell out of use (old epochs, restarted
// homes) do not pile up over a process's life. Like the machines, a Table is
// not safe for concurrent use.
package intern
