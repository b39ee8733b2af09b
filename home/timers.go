package home

import "time"

// schedule makes sure key is served at or before at.
func (m *Machine) schedule(key string, ke *entry, at time.Time) {
	if at.IsZero() || (!ke.wake.IsZero() && !ke.wake.After(at)) {
		return
	}
	ke.wake = at
	m.timers.Add(at, key)
}
