package homelock

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Collector exports a Node's Stats as Prometheus metrics, read at scrape
// time (no globals: register it with the registry of your choice).
type Collector struct {
	n      *Node
	gauges []metric
	counts []metric
	byKind *prometheus.Desc
}

type metric struct {
	desc *prometheus.Desc
	get  func(*Stats) float64
}

// NewCollector returns a Collector over n; every metric carries the node ID
// as a constant label.
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
	}
	c.counts = []metric{
		{d("admissions_total", "Critical sections admitted."), func(s *Stats) float64 { return float64(s.Admissions) }},
		{d("local_fast_total", "Critical sections admitted with zero messages."), func(s *Stats) float64 { return float64(s.LocalFast) }},
		{d("releases_total", "Delegations released to their homes."), func(s *Stats) float64 { return float64(s.Releases) }},
		{d("expired_delegations_total", "Delegations that ran out on this holder."), func(s *Stats) float64 { return float64(s.Expired) }},
		{d("grants_total", "Delegations granted as a home."), func(s *Stats) float64 { return float64(s.Grants) }},
		{d("recalls_total", "Recalls sent as a home."), func(s *Stats) float64 { return float64(s.Recalls) }},
		{d("expired_holds_total", "Delegations a home freed by waiting their lease out."), func(s *Stats) float64 { return float64(s.ExpiredHolds) }},
		{d("handoffs_total", "Keys handed to a new home."), func(s *Stats) float64 { return float64(s.Handoffs) }},
		{d("refused_total", "Requests refused as a home."), func(s *Stats) float64 { return float64(s.Refused) }},
		{d("fenced_writes_total", "Writes the embedding store refused by the fence."), func(s *Stats) float64 { return float64(s.FencedWrites) }},
		{d("clock_jumps_total", "Wall-clock jumps that dropped held delegations."), func(s *Stats) float64 { return float64(s.ClockJumps) }},
		{d("dropped_messages_total", "Messages dropped on full peer queues."), func(s *Stats) float64 { return float64(s.Dropped) }},
	}
	c.byKind = d("messages_total", "Protocol messages and bytes by kind and direction.", "kind", "direction", "unit")
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
	ch <- c.byKind
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
	for kind, k := range s.ByKind {
		for _, v := range []struct {
			dir, unit string
			n         uint64
		}{
			{"sent", "messages", k.Sent.Msgs}, {"sent", "bytes", k.Sent.Bytes},
			{"received", "messages", k.Received.Msgs}, {"received", "bytes", k.Received.Bytes},
		} {
			ch <- prometheus.MustNewConstMetric(c.byKind, prometheus.CounterValue, float64(v.n), kind, v.dir, v.unit)
		}
	}
}

var _ prometheus.Collector = (*Collector)(nil)
