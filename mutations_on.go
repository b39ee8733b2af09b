//go:build homelock_mutations

package homelock

import (
	"github.com/homelock/homelock/delegation"
	"github.com/homelock/homelock/home"
)

// mutationSwitches are the home's and the holder's switches a real node
// runs with (internal/mutations).
type mutationSwitches struct {
	h home.Mutations
	d delegation.Mutations
}

func (m mutationSwitches) home() home.Mutations         { return m.h }
func (m mutationSwitches) holder() delegation.Mutations { return m.d }

// SetMutations switches the rules in h and d off on the node c opens: for
// tests that run real nodes and must show their checks catch a broken rule
// (the soak's). It exists only in builds with the homelock_mutations tag.
func SetMutations(c *Config, h home.Mutations, d delegation.Mutations) {
	c.mutations = mutationSwitches{h: h, d: d}
}
