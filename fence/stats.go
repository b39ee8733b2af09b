package fence

import (
	"context"
	"fmt"
	"sync/atomic"
)

// guardCounters count what a Guard decided since NewGuard.
type guardCounters struct {
	accepted atomic.Uint64
	pruned   atomic.Uint64
	// opFilterRebuilds counts rebuildOpFilter's replacements.
	opFilterRebuilds atomic.Uint64
	refused          [reasonCount]atomic.Uint64
	wouldRefuse      [reasonCount]atomic.Uint64
}

// GuardStats is what a Guard decided since NewGuard, for metrics. The
// per-resource view, durable across restarts, is Resources.
type GuardStats struct {
	// DefaultMode is the mode of resources not given one with SetMode.
	DefaultMode Mode
	// Accepted counts accepted mutations (replays excluded).
	Accepted uint64
	// Pruned counts the receipts Prune deleted.
	Pruned uint64
	// OpFilterLoad is the operation filter's keys over its design load
	// (GuardOptions.OpIndexBytes): past 1, its false positives, each a
	// point read on the write path, climb past 1.1%. Index entries Prune
	// deleted count until a rebuild drops them; 0 when the filter is off.
	OpFilterLoad float64
	// OpFilterRebuilds counts the filter's rebuilds (see Prune).
	OpFilterRebuilds uint64
	// Refused counts refusals by reason, on enforced resources.
	Refused ReasonCounts
	// WouldRefuse counts, by reason, mutations shadow-mode resources
	// committed that enforcement would have refused.
	WouldRefuse ReasonCounts
	// Configured lists the resources given a mode with SetMode, or with a
	// shadow commit to their name: the few an operator rolls out one by one.
	// Resources left to the default are counted above, not listed.
	Configured []ResourceInfo
}

// Stats returns the Guard's counters and the resources it lists by name.
func (g *Guard) Stats(ctx context.Context) (GuardStats, error) {
	s := GuardStats{DefaultMode: g.defaultMode, Accepted: g.stats.accepted.Load(), Pruned: g.stats.pruned.Load(),
		OpFilterRebuilds: g.stats.opFilterRebuilds.Load()}
	if f := g.opFilter(); f != nil {
		s.OpFilterLoad = float64(f.keys.Load()) / float64(f.design)
	}
	for r := range reasonCount {
		s.Refused[r] = g.stats.refused[r].Load()
		s.WouldRefuse[r] = g.stats.wouldRefuse[r].Load()
	}
	var err error
	s.Configured, err = g.configured(ctx)
	return s, err
}

// configured lists the resources with a mode record, with their state.
func (g *Guard) configured(ctx context.Context) ([]ResourceInfo, error) {
	var out []ResourceInfo
	lower, upper := g.kindBounds(kindMode)
	err := g.scan(ctx, lower, upper, func(key, value []byte) error {
		res, err := g.resourceOnlyKey(key)
		if err != nil {
			return err
		}
		r, err := decodeModeRecord(value)
		if err != nil {
			return fmt.Errorf("resource %q: %w", res, err)
		}
		st, found, err := g.loadState(res)
		if err != nil {
			return err
		}
		out = append(out, g.info(res, &st, found, &r, true))
		return nil
	})
	return out, err
}
