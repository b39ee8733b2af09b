// Package samples holds one envelope of every message kind, with every field
// set to a value that survives a round trip, for the wire and transport tests.
package samples
