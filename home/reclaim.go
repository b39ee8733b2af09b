package home

import (
	"time"

	"github.com/homelock/homelock/internal/deadline"
	"github.com/homelock/homelock/msg"
)

// startReclaim asks every member of the restored epoch which delegations from
// this node's earlier incarnations it holds (H3: every earlier incarnation,
// not only the last; the restart gate covers members of older epochs).
func (m *Machine) startReclaim(now time.Time, e msg.Epoch) {
	m.reclaimWait = make(map[msg.NodeID]msg.Member)
	for _, mem := range e.Members {
		if mem.ID != m.cfg.Self.ID {
			m.reclaimWait[mem.ID] = mem
		}
	}
	m.sendReclaims(now)
}

func (m *Machine) sendReclaims(now time.Time) {
	m.reclaimSentAt = now
	for _, id := range deadline.SortedKeys(m.reclaimWait) {
		m.send(id, msg.Reclaim{})
	}
}

func (m *Machine) reclaimDeadline() time.Time {
	if len(m.reclaimWait) == 0 || m.restartGateEnd().IsZero() {
		return time.Time{}
	}
	return m.reclaimSentAt.Add(m.cfg.RetryInterval)
}

func (m *Machine) tickReclaim(now time.Time) {
	if d := m.reclaimDeadline(); !d.IsZero() && !now.Before(d) {
		m.sendReclaims(now)
	}
}

// ReclaimAnswer adopts the delegations a member still holds from an earlier
// incarnation, each with its remaining lease anchored at receipt plus Skew.
func (m *Machine) ReclaimAnswer(now time.Time, env msg.Envelope, a msg.ReclaimAnswer) {
	if a.ForInc != m.cfg.Inc || m.reclaimWait == nil {
		return
	}
	want, ok := m.reclaimWait[env.From.ID]
	if !ok || !want.Same(env.From) {
		return
	}
	delete(m.reclaimWait, env.From.ID)
	skew := m.cfg.Skew
	if m.cfg.Mutations.reclaimNoSkew() {
		skew = 0
	}
	for _, h := range a.Held {
		ke := m.entry(h.Key)
		if ke.deleg() != nil && !m.dtok(ke).Token().Less(h.Token) {
			continue
		}
		m.adopt(ke, peer{env.From, env.FromInc}, h.Token, h.Remaining, deadline.At(now.Add(h.Remaining+skew)), h.Barrier)
		m.stats.Adopted++
		m.serve(now, h.Key, ke)
	}
	if len(m.reclaimWait) == 0 {
		// The restart gate may have just been waived: serve what waited on it.
		for _, key := range m.keys.Keys() {
			if ke := m.keys.Get(key); ke != nil {
				m.serve(now, key, ke)
			}
		}
	}
}

// HolderRestarted frees the delegations held by earlier incarnations of a
// node that has restarted (it sent us Reclaim as incarnation inc): its
// volatile holder state is gone, so nothing runs under them any more. Only
// those of the sender's own store: a wiped node's new store counts its
// incarnations from 1 again, so a late Reclaim from its old store says
// nothing of what the new store holds (H30).
func (m *Machine) HolderRestarted(now time.Time, node msg.Member, inc uint64) {
	for _, key := range m.keys.Keys() {
		ke := m.keys.Get(key)
		if ke == nil {
			continue
		}
		if h := m.holder(ke); h != nil && h.Inc < inc && (h.Same(node) || h.ID == node.ID && m.cfg.Mutations.reclaimByNodeID()) {
			m.free(now, ke, true, nil)
			m.serve(now, key, ke)
		}
	}
}
