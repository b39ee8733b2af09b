// Package mutations says whether this build carries the protocol's mutation
// switches: test-only switches, each of which breaks one safety rule so that
// a test can show the checkers notice (a checker that stays green with the
// rule off proves nothing).
//
// The switches exist only in builds with the homelock_mutations tag, as
// Pebble's invariants exist only with its invariants tag. Without the tag
// each package's Mutations type is an empty struct whose accessors return a
// constant false: the compiler drops every check, and nothing in a normal
// build can turn a rule off. With the tag the fields are there and tests set
// them:
//
//	go test -tags homelock_mutations ./cluster_test ./internal/core ./epoch
//
// docs/testing.md says which tests need the tag and how to add a switch.
package mutations
