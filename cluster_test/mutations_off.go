//go:build !homelock_mutations

package clustertest

import (
	"github.com/homelock/homelock/delegation"
	"github.com/homelock/homelock/epoch"
	"github.com/homelock/homelock/home"
)

// Mutations is empty of switches without the homelock_mutations tag: the
// machines' Mutations are empty too and the simulated disk keeps everything
// (mutations_on.go documents the switches).
type Mutations struct {
	Home   home.Mutations
	Holder delegation.Mutations
	Epoch  epoch.Mutations
}

// Any is false: no rule can be switched off in this build.
func (Mutations) Any() bool { return false }

func (Mutations) incarnationNotPersisted() bool { return false }
func (Mutations) acceptorNotPersisted() bool    { return false }
func (Mutations) learnedNotPersisted() bool     { return false }
