// Package dtoken is a delegation's token as homes and holders keep it: a
// fence.Token without its section. A delegation as a whole has no section
// (the holder numbers the critical sections it admits), and homes and
// holders keep one per key for up to a million keys, so they keep the 24
// bytes that name the delegation rather than the 32 of a fence.Token.
package dtoken
