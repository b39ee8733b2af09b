package homelock

import (
	"os"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// Every metric the collectors export (the node's and a Guard's) is
// documented in docs/metrics.md, and every homelock metric that the docs or
// the Grafana dashboard name exists.
func TestMetricsDocumented(t *testing.T) {
	descs := make(chan *prometheus.Desc, 100)
	NewCollector(&Node{cfg: Config{NodeID: "n1"}}).Describe(descs)
	NewGuardCollector(nil, nil).Describe(descs)
	close(descs)
	fqName := regexp.MustCompile(`fqName: "([a-z_]+)"`)
	var exported []string
	for d := range descs {
		m := fqName.FindStringSubmatch(d.String())
		require.NotNil(t, m, d.String())
		exported = append(exported, m[1])
	}
	named := regexp.MustCompile(`\bhomelock_[a-z_]+`)
	for _, file := range []string{"docs/metrics.md", "docs/grafana-dashboard.json"} {
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		names := named.FindAllString(string(b), -1)
		for _, n := range names {
			require.Contains(t, exported, n, "%s names %s, which the collector does not export", file, n)
		}
		if file == "docs/metrics.md" {
			for _, e := range exported {
				require.True(t, slices.Contains(names, e), "%s is not documented in %s", e, file)
			}
		}
	}
}

// The collector exports when each other member was last heard, and nothing
// for the node itself.
func TestMetricsMemberLastHeard(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.waitAvailable()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(NewCollector(c.nodes[0])))
	require.Eventually(t, func() bool {
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() != "homelock_member_last_heard_timestamp_seconds" {
				continue
			}
			var members []string
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "member" {
						members = append(members, l.GetValue())
					}
				}
				age := time.Since(time.Unix(0, int64(m.GetGauge().GetValue()*1e9)))
				if age < -time.Second || age > c.cfgs[0].EpochLease {
					return false
				}
			}
			slices.Sort(members)
			return slices.Equal(members, []string{c.nodes[1].ID(), c.nodes[2].ID()})
		}
		return false
	}, 10*time.Second, 50*time.Millisecond)
}
