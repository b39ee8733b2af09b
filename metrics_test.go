package homelock

import (
	"os"
	"regexp"
	"slices"
	"testing"

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
