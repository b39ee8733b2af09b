package clientapi

import (
	"time"

	"github.com/homelock/homelock"
	"github.com/homelock/homelock/msg"
)

// Report is what Status returns, as JSON, and what `homelock status --json`
// prints. Its fields are snake_case and every quantity with a unit says it
// in its name (live_for_ms, sent_bytes); store IDs are 16 hex digits, as in
// the node's log.
type Report struct {
	Status StatusReport `json:"status"`
	Stats  StatsReport  `json:"stats"`
}

// StatusReport is homelock.Status.
type StatusReport struct {
	NodeID          string         `json:"node_id"`
	StoreID         string         `json:"store_id"`
	Incarnation     uint64         `json:"incarnation"`
	ProtocolVersion uint32         `json:"protocol_version"`
	Epoch           uint64         `json:"epoch"`
	Members         []MemberReport `json:"members"`
	LiveForMS       int64          `json:"live_for_ms"`
	Available       bool           `json:"available"`
	Reason          string         `json:"reason,omitempty"`
	// Phase says where the node stands in its membership: "member", or
	// what it waits for ("bootstrapping: waiting for n2, n3 in gossip").
	Phase string `json:"phase"`
	// GossipEncryption is "off", "on", or a step of turning it on or off.
	GossipEncryption string `json:"gossip_encryption"`
}

// MemberReport is homelock.MemberStatus.
type MemberReport struct {
	ID              string `json:"id"`
	StoreID         string `json:"store_id"`
	Addr            string `json:"addr"`
	ProtocolVersion uint32 `json:"protocol_version"`
	Liveness        string `json:"liveness"`
	// HeardMSAgo is how long ago a peer message from the member last
	// reached this node (-1: never since it started; 0 for the node itself).
	HeardMSAgo int64 `json:"heard_ms_ago"`
	// Relayed: this node sends to the member through other members, having
	// had no stream to it, or one it acknowledged nothing on, for a quarter
	// of MaxLease (at most a second), or having had its messages relayed.
	Relayed bool `json:"relayed,omitempty"`
	Self    bool `json:"self"`
}

// StatsReport is homelock.Stats: gauges are the state now, the rest count
// since the node started.
type StatsReport struct {
	HeldDelegations    int                   `json:"held_delegations"`
	PendingAcquires    int                   `json:"pending_acquires"`
	DeferredLockers    int                   `json:"deferred_lockers"`
	Admissions         uint64                `json:"admissions"`
	LocalFastPath      uint64                `json:"local_fast_path"`
	Releases           uint64                `json:"releases"`
	ExpiredDelegations uint64                `json:"expired_delegations"`
	UnusedGrants       uint64                `json:"unused_grants"`
	LiveDelegations    int                   `json:"live_delegations"`
	WaitingRequests    int                   `json:"waiting_requests"`
	Grants             uint64                `json:"grants"`
	Recalls            uint64                `json:"recalls"`
	ExpiredHolds       uint64                `json:"expired_holds"`
	Handoffs           uint64                `json:"handoffs"`
	HandedOver         uint64                `json:"handed_over"`
	TakenOver          uint64                `json:"taken_over"`
	Refused            uint64                `json:"refused"`
	FencedWrites       uint64                `json:"fenced_writes"`
	ClockJumps         uint64                `json:"clock_jumps"`
	SentMessages       uint64                `json:"sent_messages"`
	SentBytes          uint64                `json:"sent_bytes"`
	ReceivedMessages   uint64                `json:"received_messages"`
	ReceivedBytes      uint64                `json:"received_bytes"`
	DroppedMessages    uint64                `json:"dropped_messages"`
	LostStreams        uint64                `json:"lost_streams"`
	RelayedMessages    uint64                `json:"relayed_messages"`
	ForwardedMessages  uint64                `json:"forwarded_messages"`
	ByKind             map[string]KindReport `json:"by_kind"`
}

// KindReport counts one message kind in each direction.
type KindReport struct {
	SentMessages     uint64 `json:"sent_messages"`
	SentBytes        uint64 `json:"sent_bytes"`
	ReceivedMessages uint64 `json:"received_messages"`
	ReceivedBytes    uint64 `json:"received_bytes"`
}

// NewReport is the Report of a node's status and stats.
func NewReport(st homelock.Status, s homelock.Stats) Report {
	r := Report{
		Status: StatusReport{
			NodeID: st.NodeID, StoreID: msg.FormatStore(st.StoreID), Incarnation: st.Incarnation,
			ProtocolVersion: st.ProtocolVersion, Epoch: st.Epoch, LiveForMS: st.LiveFor.Milliseconds(),
			Available: st.Available, Reason: st.Reason, Phase: st.Phase, GossipEncryption: st.Gossip,
			Members: make([]MemberReport, 0, len(st.Members)),
		},
		Stats: StatsReport{
			HeldDelegations: s.Held, PendingAcquires: s.Pending, DeferredLockers: s.Deferred,
			Admissions: s.Admissions, LocalFastPath: s.LocalFast, Releases: s.Releases,
			ExpiredDelegations: s.Expired, UnusedGrants: s.Unused,
			LiveDelegations: s.Live, WaitingRequests: s.Waiting, Grants: s.Grants, Recalls: s.Recalls,
			ExpiredHolds: s.ExpiredHolds, Handoffs: s.Handoffs, HandedOver: s.HandedOver, TakenOver: s.TakenOver, Refused: s.Refused,
			FencedWrites: s.FencedWrites, ClockJumps: s.ClockJumps,
			SentMessages: s.Sent.Msgs, SentBytes: s.Sent.Bytes,
			ReceivedMessages: s.Received.Msgs, ReceivedBytes: s.Received.Bytes,
			DroppedMessages: s.Dropped, LostStreams: s.Lost, RelayedMessages: s.Relayed, ForwardedMessages: s.Forwarded,
			ByKind: make(map[string]KindReport, len(s.ByKind)),
		},
	}
	for _, m := range st.Members {
		heard := int64(-1)
		switch {
		case m.Self:
			heard = 0
		case !m.Heard.IsZero():
			heard = max(time.Since(m.Heard).Milliseconds(), 0)
		}
		r.Status.Members = append(r.Status.Members, MemberReport{ID: m.ID, StoreID: msg.FormatStore(m.StoreID),
			Addr: m.Addr, ProtocolVersion: m.Version, Liveness: m.Liveness, HeardMSAgo: heard, Relayed: m.Relayed, Self: m.Self})
	}
	for k, v := range s.ByKind {
		r.Stats.ByKind[k] = KindReport{SentMessages: v.Sent.Msgs, SentBytes: v.Sent.Bytes,
			ReceivedMessages: v.Received.Msgs, ReceivedBytes: v.Received.Bytes}
	}
	return r
}
