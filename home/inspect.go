package home

import "time"

// QueueOrder reports, for checkers, when the live delegation's request joined
// the queue and when each request still queued for key did. FIFO holds when
// no queued request is older than the one granted. The first is kept only
// while requests queue behind the delegation (zero otherwise), which is the
// only time FIFO can be broken: right after a grant.
func (m *Machine) QueueOrder(key string) (granted time.Time, ok bool, queued []time.Time) {
	ke := m.keys.Get(key)
	if ke == nil || ke.deleg() == nil {
		return time.Time{}, false, nil
	}
	for _, w := range ke.waiters() {
		queued = append(queued, w.since)
	}
	return ke.more().waitedSince, true, queued
}
