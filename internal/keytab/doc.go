// Package keytab is the machines' table of per-key states: a hash table of
// pointers to states that each hold their own key.
//
// A Go map[string]*T keeps the key's string header beside the pointer and
// grows a whole table of such slots at a time: at a million keys it cost
// 40 to 48 bytes per key, as much again as half the state it points to. This
// table keeps one pointer and one tag byte per slot, open addressing with
// linear probing, so a million keys cost 9 bytes a slot at a load between
// 7/16 and 7/8 (10 to 21 bytes per key). The tag (seven bits of the hash)
// spares a probe the pointer chase and string compare on all but about one
// mismatch in 128. It shrinks again when most keys are gone.
//
// Iteration order is not defined and differs from process to process (the
// hash is seeded): the machines iterate in key order (Keys) wherever an
// iteration emits anything, so that a run is a function of its inputs.
// Like the machines, a Table is not safe for concurrent use.
package keytab
