package homelock

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/homelock/homelock/fence"
)

// GuardCollector exports what a store's fence.Guard decided as Prometheus
// metrics, read at scrape time: accepted mutations, refusals and shadow-mode
// would-refuse counts by reason, and, for each resource given a mode (the
// few an operator rolls out one by one), its mode, its durable would-refuse
// counts and its highest fence. Resources left to the default mode are
// counted, not listed, so the series stay few however many keys a store
// fences.
type GuardCollector struct {
	g                                 *fence.Guard
	defaultMode, accepted, refused    *prometheus.Desc
	pruned, filterLoad, rebuilds      *prometheus.Desc
	wouldRefuse, mode, resWouldRefuse *prometheus.Desc
	highest                           *prometheus.Desc
}

// NewGuardCollector returns a collector over g; labels are constant labels
// on every metric (the node ID, say).
func NewGuardCollector(g *fence.Guard, labels prometheus.Labels) *GuardCollector {
	d := func(name, help string, vars ...string) *prometheus.Desc {
		return prometheus.NewDesc("homelock_fence_"+name, help, vars, labels)
	}
	return &GuardCollector{
		g:              g,
		defaultMode:    d("default_mode", "1 for the Guard's default mode.", "mode"),
		accepted:       d("accepted_total", "Fenced mutations accepted."),
		pruned:         d("receipts_pruned_total", "Receipts (and their operation-index entries) that Guard.Prune deleted."),
		filterLoad:     d("op_filter_load_ratio", "The operation filter's keys over its design load; past 1 its false positives cost reads."),
		rebuilds:       d("op_filter_rebuilds_total", "Rebuilds of the operation filter after Prune deleted much of what it holds."),
		refused:        d("refused_total", "Fenced mutations refused on enforced resources, by reason.", "reason"),
		wouldRefuse:    d("would_refuse_total", "Mutations shadow-mode resources committed that enforcement would have refused, by reason.", "reason"),
		mode:           d("resource_mode", "1 for the mode of a resource given one.", "resource", "mode"),
		resWouldRefuse: d("resource_would_refuse_total", "Durable would-refuse count of a listed resource, by reason.", "resource", "reason"),
		highest:        d("resource_highest_fence", "1 for the highest fence a listed resource accepted.", "resource", "token"),
	}
}

// Describe implements prometheus.Collector.
func (c *GuardCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.defaultMode, c.accepted, c.pruned, c.filterLoad, c.rebuilds, c.refused, c.wouldRefuse, c.mode, c.resWouldRefuse, c.highest} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *GuardCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := c.g.Stats(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.mode, err)
	}
	ch <- prometheus.MustNewConstMetric(c.defaultMode, prometheus.GaugeValue, 1, s.DefaultMode.String())
	ch <- prometheus.MustNewConstMetric(c.accepted, prometheus.CounterValue, float64(s.Accepted))
	ch <- prometheus.MustNewConstMetric(c.pruned, prometheus.CounterValue, float64(s.Pruned))
	ch <- prometheus.MustNewConstMetric(c.filterLoad, prometheus.GaugeValue, s.OpFilterLoad)
	ch <- prometheus.MustNewConstMetric(c.rebuilds, prometheus.CounterValue, float64(s.OpFilterRebuilds))
	for _, r := range fence.Reasons() {
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(s.Refused[r]), r.String())
		ch <- prometheus.MustNewConstMetric(c.wouldRefuse, prometheus.CounterValue, float64(s.WouldRefuse[r]), r.String())
	}
	for _, in := range s.Configured {
		ch <- prometheus.MustNewConstMetric(c.mode, prometheus.GaugeValue, 1, in.Resource, in.Mode.String())
		ch <- prometheus.MustNewConstMetric(c.highest, prometheus.GaugeValue, 1, in.Resource, in.Highest.String())
		for _, r := range fence.Reasons() {
			ch <- prometheus.MustNewConstMetric(c.resWouldRefuse, prometheus.CounterValue, float64(in.WouldRefuse[r]), in.Resource, r.String())
		}
	}
}
