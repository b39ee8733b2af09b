package homelock

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Collector exports a Node's Stats as Prometheus metrics, read at scrape
// time (no globals: register it with the registry of your choice).
type Collector struct {
	n         *Node
	gauges    []metric
	counts    []metric
	status    []statusMetric
	kindMsgs  *prometheus.Desc
	kindBytes *prometheus.Desc
	heard     *prometheus.Desc
}

type metric struct {
	desc *prometheus.Desc
	get  func(*Stats) float64
}

type statusMetric struct {
	desc *prometheus.Desc
	get  func(*Status) float64
}

// NewCollector returns a Collector over n; every metric carries the node ID
// as a constant label. The repository's docs/metrics.md lists them with
// their types and units.
func NewCollector(n *Node) *Collector {
	labels := prometheus.Labels{"node": n.cfg.NodeID}
	d := func(name, help string, vars ...string) *prometheus.Desc {
		return prometheus.NewDesc("homelock_"+name, help, vars, labels)
	}
	c := &Collector{n: n}
	c.gauges = []metric{
		{d("held_delegations", "Delegations this node holds."), func(s *Stats) float64 { return float64(s.Held) }},
		{d("pending_acquires", "Keys with an Acquire outstanding."), func(s *Stats) float64 { return float64(s.Pending) }},
		{d("deferred_lockers", "Local lockers queued."), func(s *Stats) float64 { return float64(s.Deferred) }},
		{d("live_delegations", "Live delegations granted by this node as a home."), func(s *Stats) float64 { return float64(s.Live) }},
		{d("waiting_requests", "Requests queued at this node as a home."), func(s *Stats) float64 { return float64(s.Waiting) }},
		{d("inbox_envelopes", "Received messages waiting for a step."), func(s *Stats) float64 { return float64(s.Inbox) }},
	}
	c.counts = []metric{
		{d("admissions_total", "Critical sections admitted."), func(s *Stats) float64 { return float64(s.Admissions) }},
		{d("local_fast_total", "Critical sections admitted with zero messages."), func(s *Stats) float64 { return float64(s.LocalFast) }},
		{d("releases_total", "Delegations released to their homes."), func(s *Stats) float64 { return float64(s.Releases) }},
		{d("expired_delegations_total", "Delegations that ran out on this holder."), func(s *Stats) float64 { return float64(s.Expired) }},
		{d("grants_total", "Delegations granted as a home."), func(s *Stats) float64 { return float64(s.Grants) }},
		{d("recalls_total", "Recalls sent as a home."), func(s *Stats) float64 { return float64(s.Recalls) }},
		{d("expired_holds_total", "Delegations a home freed by waiting their lease out."), func(s *Stats) float64 { return float64(s.ExpiredHolds) }},
		{d("handoffs_total", "Delegations released while others waited, the key going to the next waiter."), func(s *Stats) float64 { return float64(s.Handoffs) }},
		{d("handed_over_total", "Live delegations of moved keys handed to the key's new home."), func(s *Stats) float64 { return float64(s.HandedOver) }},
		{d("taken_over_total", "Live delegations of moved keys taken over from the key's old home."), func(s *Stats) float64 { return float64(s.TakenOver) }},
		{d("refused_total", "Requests refused as a home."), func(s *Stats) float64 { return float64(s.Refused) }},
		{d("fenced_writes_total", "Writes the embedding store refused by the fence."), func(s *Stats) float64 { return float64(s.FencedWrites) }},
		{d("clock_jumps_total", "Wall-clock jumps that dropped held delegations."), func(s *Stats) float64 { return float64(s.ClockJumps) }},
		{d("unused_grants_total", "Grants not used: given back (late, recalled or withdrawn), or meant for this node's wiped old store."), func(s *Stats) float64 { return float64(s.Unused) }},
		{d("dropped_messages_total", "Messages dropped on full peer queues."), func(s *Stats) float64 { return float64(s.Dropped) }},
		{d("lost_streams_total", "Peer streams that failed."), func(s *Stats) float64 { return float64(s.Lost) }},
		{d("relayed_messages_total", "Messages sent through another member to a peer this node had no stream to, or one the peer stopped acknowledging, or whose own messages came relayed."), func(s *Stats) float64 { return float64(s.Relayed) }},
		{d("forwarded_messages_total", "Messages forwarded for another member that had no stream to their addressee."), func(s *Stats) float64 { return float64(s.Forwarded) }},
		{d("relay_dropped_messages_total", "Messages given to this node to forward that it could not, having no stream to their addressee either."), func(s *Stats) float64 { return float64(s.RelayDropped) }},
		{d("inbox_full_total", "Received messages that found the inbox full, their stream made to wait."), func(s *Stats) float64 { return float64(s.InboxFull) }},
	}
	c.status = []statusMetric{
		{d("epoch", "The learned membership epoch (0: none agreed yet)."), func(s *Status) float64 { return float64(s.Epoch) }},
		{d("epoch_liveness_seconds", "Epoch liveness this node holds: how long it may still grant without a renewal round."),
			func(s *Status) float64 { return s.LiveFor.Seconds() }},
		{d("epoch_members", "Members of the learned epoch."), func(s *Status) float64 { return float64(len(s.Members)) }},
		{d("available", "1 if cluster locks can be had through this node (a member, one protocol version, liveness), else 0."),
			func(s *Status) float64 {
				if s.Available {
					return 1
				}
				return 0
			}},
	}
	c.kindMsgs = d("messages_total", "Protocol messages by kind and direction.", "kind", "direction")
	c.kindBytes = d("message_bytes_total", "Encoded bytes of protocol messages by kind and direction.", "kind", "direction")
	c.heard = d("member_last_heard_timestamp_seconds",
		"When a protocol message from each other member last reached this node (Unix time; absent until one has).", "member")
	return c
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.gauges {
		ch <- m.desc
	}
	for _, m := range c.counts {
		ch <- m.desc
	}
	for _, m := range c.status {
		ch <- m.desc
	}
	ch <- c.kindMsgs
	ch <- c.kindBytes
	ch <- c.heard
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.n.Stats()
	for _, m := range c.gauges {
		ch <- prometheus.MustNewConstMetric(m.desc, prometheus.GaugeValue, m.get(&s))
	}
	for _, m := range c.counts {
		ch <- prometheus.MustNewConstMetric(m.desc, prometheus.CounterValue, m.get(&s))
	}
	st := c.n.Status()
	for _, m := range c.status {
		ch <- prometheus.MustNewConstMetric(m.desc, prometheus.GaugeValue, m.get(&st))
	}
	for _, m := range st.Members {
		if !m.Self && !m.Heard.IsZero() {
			ch <- prometheus.MustNewConstMetric(c.heard, prometheus.GaugeValue, float64(m.Heard.UnixNano())/1e9, m.ID)
		}
	}
	for kind, k := range s.ByKind {
		ch <- prometheus.MustNewConstMetric(c.kindMsgs, prometheus.CounterValue, float64(k.Sent.Msgs), kind, "sent")
		ch <- prometheus.MustNewConstMetric(c.kindBytes, prometheus.CounterValue, float64(k.Sent.Bytes), kind, "sent")
		ch <- prometheus.MustNewConstMetric(c.kindMsgs, prometheus.CounterValue, float64(k.Received.Msgs), kind, "received")
		ch <- prometheus.MustNewConstMetric(c.kindBytes, prometheus.CounterValue, float64(k.Received.Bytes), kind, "received")
	}
}

var _ prometheus.Collector = (*Collector)(nil)
