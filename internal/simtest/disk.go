package simtest

import "slices"

// Disk is what survives a node's crash: only what a step asked to sync, as
// a real driver writes it before sending that step's messages. A is the
// acceptor record (one per instance, replaced by a later one) and L the
// learned epoch; they are type parameters so that epoch's own tests can use
// the model without an import cycle.
type Disk[A, L any] struct {
	// Store is the store ID; 0 for a harness that does not model one.
	Store uint64
	// Inc is the last home incarnation synced.
	Inc      uint64
	acceptor map[uint64]A
	learned  *L
	// Markers are the reclaim markers synced and not yet cleared.
	Markers map[uint64]bool
}

// NewDisk is an empty disk of the given store.
func NewDisk[A, L any](store uint64) Disk[A, L] {
	return Disk[A, L]{Store: store, acceptor: map[uint64]A{}, Markers: map[uint64]bool{}}
}

// SyncAcceptor writes the record of an instance, replacing the one before.
func (d *Disk[A, L]) SyncAcceptor(instance uint64, r A) {
	if d.acceptor == nil {
		d.acceptor = map[uint64]A{}
	}
	d.acceptor[instance] = r
}

// SyncLearned writes the learned epoch.
func (d *Disk[A, L]) SyncLearned(l L) { d.learned = &l }

// Learned is the learned epoch synced, nil before the first. It is the
// disk's own copy: read it, do not change it.
func (d *Disk[A, L]) Learned() *L { return d.learned }

// Prune drops the acceptor records of instances up to upTo: decided, they
// are answered from the learned epoch (a driver deletes them with the
// learned epoch's write).
func (d *Disk[A, L]) Prune(upTo uint64) {
	for i := range d.acceptor {
		if i <= upTo {
			delete(d.acceptor, i)
		}
	}
}

// Acceptors are the acceptor records synced, by instance: what a restart
// loads.
func (d *Disk[A, L]) Acceptors() []A {
	keys := make([]uint64, 0, len(d.acceptor))
	for k := range d.acceptor {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]A, 0, len(keys))
	for _, k := range keys {
		out = append(out, d.acceptor[k])
	}
	return out
}

// MarkerList is the markers synced, sorted.
func (d *Disk[A, L]) MarkerList() []uint64 {
	out := make([]uint64, 0, len(d.Markers))
	for m := range d.Markers {
		out = append(out, m)
	}
	slices.Sort(out)
	return out
}

// Wipe is a new empty disk under another store ID (H17, H21: the operator
// replaced the disk and started the node again under its old ID).
func (d *Disk[A, L]) Wipe(store uint64) { *d = NewDisk[A, L](store) }
