package home

import (
	"time"

	"github.com/homelock/homelock/internal/deadline"
)

// schedule makes sure ke is served at or before at.
func (m *Machine) schedule(ke *entry, at time.Time) { m.timers.Add(ke, deadline.At(at)) }
