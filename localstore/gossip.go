package localstore

import (
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/homelock/homelock/msg"
)

// Gossip addresses of the epoch's members, kept so that a restarted node
// rejoins gossip without seeds. Advisory: written without a sync, and a
// stale or lost record costs only a seed (the node then needs Config.Join or
// a peer that rejoins it).
//
//	gossip v1: 1 | uvarint count | count × (str id | str addr), ids ascending

const gossipV1 byte = 1

func encodeGossip(addrs map[msg.NodeID]string) []byte {
	e := encoder{b: []byte{gossipV1}}
	ids := make([]msg.NodeID, 0, len(addrs))
	for id := range addrs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	e.uvarint(uint64(len(ids)))
	for _, id := range ids {
		e.str(string(id))
		e.str(addrs[id])
	}
	return e.b
}

func decodeGossip(b []byte) (map[msg.NodeID]string, error) {
	d := decoder{b: b}
	d.version(gossipV1)
	n := d.uvarint()
	if n > uint64(len(b)) {
		d.fail("%d addresses in %d bytes", n, len(b))
	}
	out := make(map[msg.NodeID]string)
	var last msg.NodeID
	for i := uint64(0); i < n && d.err == nil; i++ {
		id, addr := msg.NodeID(d.str()), d.str()
		if id == "" || (i > 0 && id <= last) {
			d.fail("node IDs not ascending at %q", id)
		}
		last = id
		out[id] = addr
	}
	if err := d.finish(); err != nil {
		return nil, fmt.Errorf("gossip addresses: %w", err)
	}
	return out, nil
}

// SaveGossipAddrs replaces the remembered gossip addresses (not synced).
func (s *Store) SaveGossipAddrs(addrs map[msg.NodeID]string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writable(); err != nil {
		return err
	}
	if err := s.db.Set(gossipKey, encodeGossip(addrs), pebble.NoSync); err != nil {
		return fmt.Errorf("localstore: write %q gossip addresses: %w", s.dir, err)
	}
	return nil
}

// GossipAddrs returns the remembered gossip addresses by node ID (empty if
// none were saved).
func (s *Store) GossipAddrs() (map[msg.NodeID]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.readable(); err != nil {
		return nil, err
	}
	v, err := s.get(gossipKey)
	if err != nil || v == nil {
		return map[msg.NodeID]string{}, err
	}
	g, err := decodeGossip(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrCorrupt, s.dir, err)
	}
	return g, nil
}
