//go:build !homelock_mutations

package homelock

import (
	"github.com/homelock/homelock/delegation"
	"github.com/homelock/homelock/home"
)

// mutationSwitches is empty without the homelock_mutations tag: nothing in
// a normal build can switch a rule off (internal/mutations).
type mutationSwitches struct{}

func (mutationSwitches) home() home.Mutations         { return home.Mutations{} }
func (mutationSwitches) holder() delegation.Mutations { return delegation.Mutations{} }
