// Package dtoken is a delegation's token as homes and holders keep it: a
// fence.Token without its section. A delegation as a whole has no section
// (the holder numbers the critical sections it admits), and homes and
// holders keep one per key for up to a million keys, so a T is the 24
// bytes that name the delegation rather than the 32 of a fence.Token. In
// their per-key state they keep less still: the counter, with the epoch and
// incarnation the delegations granted alongside share in an intern.Table.
package dtoken
