package localstore

import (
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/homelock/homelock/msg"
)

// Options configure Open.
type Options struct {
	// FS is where the store's files live; nil means vfs.Default (the OS).
	// Tests pass vfs.NewCrashableMem to simulate crashes that lose unsynced
	// data.
	FS vfs.FS
	// NodeID is the operator-chosen name of this node; required. A directory
	// created under one node ID refuses to open under another (S2).
	NodeID msg.NodeID
	// ClusterID names the lock domain; required. A directory created for one
	// cluster refuses to open for another (S2): its promises were made to
	// other acceptors' proposers.
	ClusterID string
	// Logger receives the store's and Pebble's log lines (Pebble's routine
	// ones at debug level, marked subsystem=pebble); nil discards them. It
	// is used as given: the caller names the component and node.
	Logger *slog.Logger
}

func (o Options) validate() error {
	if o.NodeID == "" {
		return fmt.Errorf("%w: NodeID is empty", ErrInvalidOptions)
	}
	if o.ClusterID == "" {
		return fmt.Errorf("%w: ClusterID is empty", ErrInvalidOptions)
	}
	return nil
}

// Identity is who a store belongs to, fixed when the store is created.
type Identity struct {
	NodeID msg.NodeID
	// StoreID is random and non-zero, created with the store. Members are
	// (NodeID, StoreID) pairs, so a wiped directory under a reused node ID is
	// a new member that made no promises (H17).
	StoreID   uint64
	ClusterID string
}
