package home

import (
	"github.com/homelock/homelock/internal/outbuf"
	"github.com/homelock/homelock/msg"
)

// Output is what the machine asks its driver to do: sync GatePassed markers,
// then send Msgs. Envelope headers are filled by the driver except To.
type Output struct {
	Msgs       []msg.Envelope
	GatePassed []uint64
}

// Stats are counters and gauges of one home.
type Stats struct {
	Grants       uint64
	Recalls      uint64
	Releases     uint64
	ExpiredHolds uint64
	Handoffs     uint64
	Refused      uint64
	Drained      uint64 // Drained answers sent
	Adopted      uint64 // delegations adopted by reclaim
	HandedOver   uint64 // live delegations handed to their key's new home
	TakenOver    uint64 // live delegations taken over from a key's old home
	Live         int    // live delegations now
	Waiting      int    // queued requests now
}

func (m *Machine) send(to msg.NodeID, body msg.Body) {
	m.out.Msgs = append(m.out.Msgs, msg.Envelope{To: to, Body: body})
}

// Ready returns what the inputs since the last call asked for and resets it.
// Its Msgs are good until the machine's next call: the driver copies them
// out at once, so the machine keeps their array for the next step's instead
// of allocating one per step.
func (m *Machine) Ready() Output {
	o := m.out
	m.out = Output{Msgs: outbuf.Keep(&m.kept, o.Msgs)}
	return o
}
