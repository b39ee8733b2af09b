package fence

import (
	"context"
	"fmt"
	"sort"

	"github.com/cockroachdb/pebble/v2"
)

// ResourceInfo describes one resource the Guard protects.
type ResourceInfo struct {
	Resource string
	// Domain and Scope are the lock domain the resource is bound to.
	Domain string
	Scope  Scope
	// Highest is the highest fence accepted (zero if bound but never written).
	Highest     Token
	LastSegment uint64
	// Accepted counts accepted mutations.
	Accepted uint64
	// MigratingFrom is the previous domain while a migration waits for the
	// new domain's first token above Highest; empty otherwise.
	MigratingFrom string
	// PrunedBelow is the fence Prune deleted receipts below (zero if never
	// pruned).
	PrunedBelow Token
	// Mode is the mode the resource is in; ModeSet says SetMode chose it,
	// rather than the Guard's default.
	Mode    Mode
	ModeSet bool
	// EnforcedAt and EnforcedHighest are Accepted and Highest when SetMode
	// moved the resource from shadow to enforce (zero if it never did).
	EnforcedAt      uint64
	EnforcedHighest Token
	// WouldRefuse counts, by reason, the mutations committed in shadow mode
	// that enforcement would have refused; ShadowUnlogged, how many of them
	// the full shadow log did not record.
	WouldRefuse    ReasonCounts
	ShadowUnlogged uint64
}

// Bind binds resource to a lock domain before its first write (F4). Binding
// again to the same domain and scope is a no-op; any other binding of a bound
// resource is ErrForeignDomain (use Migrate).
func (g *Guard) Bind(ctx context.Context, resource, domain string, scope Scope) error {
	if err := g.checkBinding(resource, domain, scope); err != nil {
		return err
	}
	s, err := g.lock(ctx, resource)
	if err != nil {
		return err
	}
	defer s.unlock()
	e, err := g.entry(s, resource)
	if err != nil {
		return err
	}
	if e.found {
		if e.st.Domain == domain && e.st.Scope == scope {
			return nil
		}
		return fmt.Errorf("%w: resource %q is bound to %s domain %q, not %s domain %q", ErrForeignDomain, resource, e.st.Scope, e.st.Domain, scope, domain)
	}
	return g.writeState(s, e, resource, resourceState{Domain: domain, Scope: scope})
}

// Migrate moves resource from lock domain from to lock domain to, keeping its
// highest fence. From then on grants from the old domain are ErrForeignDomain
// and grants from the new one are ErrMigrationPending until one carries a
// token above the old highest fence: the new domain's order must continue
// above the old one's (docs/design.md, "Fencing and the Guard"), and nothing resets the highest value (F1).
// The new domain's operator makes that hold, for instance by starting its
// epoch numbers above ResourceInfo.Highest.Epoch.
func (g *Guard) Migrate(ctx context.Context, resource, from, to string) error {
	if err := g.checkBinding(resource, to, ScopeCluster); err != nil {
		return err
	}
	s, err := g.lock(ctx, resource)
	if err != nil {
		return err
	}
	defer s.unlock()
	e, err := g.entry(s, resource)
	if err != nil {
		return err
	}
	st := e.st
	switch {
	case !e.found:
		return fmt.Errorf("%w: resource %q is not bound; Bind it to %q", ErrForeignDomain, resource, to)
	case st.Domain != from:
		return fmt.Errorf("%w: resource %q is bound to domain %q, not %q", ErrForeignDomain, resource, st.Domain, from)
	case st.Scope != ScopeCluster:
		return fmt.Errorf("%w: resource %q is node-scope; only cluster domains migrate", ErrForeignDomain, resource)
	case from == to:
		return nil
	}
	st.Domain = to
	if !st.Highest.IsZero() {
		st.MigratedFrom = from
	}
	return g.writeState(s, e, resource, st)
}

func (g *Guard) checkBinding(resource, domain string, scope Scope) error {
	switch {
	case len(resource) > MaxResourceLen || len(domain) > MaxNameLen:
		return fmt.Errorf("%w: resource or domain over %d/%d bytes", ErrTooLarge, MaxResourceLen, MaxNameLen)
	case resource == "" || domain == "":
		return fmt.Errorf("%w: empty resource or domain", ErrBadMutation)
	case !scope.valid():
		return fmt.Errorf("%w: scope %d is neither cluster nor node", ErrBadMutation, uint8(scope))
	case g.domain != "" && (domain != g.domain || scope != ScopeCluster):
		return fmt.Errorf("%w: guard serves only cluster domain %q, not %s domain %q: resource %q", ErrForeignDomain, g.domain, scope, domain, resource)
	}
	return nil
}

// writeState stores st as resource's state and, once it is committed, in e
// (s held).
func (g *Guard) writeState(s *stripe, e *entry, resource string, st resourceState) error {
	st.version = stateExact
	if err := g.db.Set(g.stateKey(resource), st.encode(), pebble.Sync); err != nil {
		s.forget(resource)
		return fmt.Errorf("fence: commit resource %q: %w", resource, err)
	}
	e.st, e.found = st, true
	return nil
}

// Resources lists the resources the Guard protects, sorted by name: the
// inventory that shows each resource has exactly one lock domain and the mode
// it is in. A resource given a mode but never written is listed with its
// mode only.
func (g *Guard) Resources(ctx context.Context) ([]ResourceInfo, error) {
	type rec struct {
		st      resourceState
		found   bool
		mode    modeRecord
		hasMode bool
	}
	byRes := map[string]*rec{}
	get := func(res string) *rec {
		r := byRes[res]
		if r == nil {
			r = &rec{}
			byRes[res] = r
		}
		return r
	}
	lower, upper := g.kindBounds(kindState)
	err := g.scan(ctx, lower, upper, func(key, value []byte) error {
		res, err := g.resourceOnlyKey(key)
		if err != nil {
			return err
		}
		st, err := decodeState(value)
		if err != nil {
			return fmt.Errorf("resource %q: %w", res, err)
		}
		if err := g.carryOn(res, &st); err != nil {
			return err
		}
		r := get(res)
		r.st, r.found = st, true
		return nil
	})
	if err != nil {
		return nil, err
	}
	lower, upper = g.kindBounds(kindMode)
	err = g.scan(ctx, lower, upper, func(key, value []byte) error {
		res, err := g.resourceOnlyKey(key)
		if err != nil {
			return err
		}
		m, err := decodeModeRecord(value)
		if err != nil {
			return fmt.Errorf("resource %q: %w", res, err)
		}
		r := get(res)
		r.mode, r.hasMode = m, true
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]ResourceInfo, 0, len(byRes))
	for res, r := range byRes {
		out = append(out, g.info(res, &r.st, r.found, &r.mode, r.hasMode))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Resource < out[j].Resource })
	return out, nil
}

func (g *Guard) info(res string, st *resourceState, found bool, m *modeRecord, hasMode bool) ResourceInfo {
	in := ResourceInfo{Resource: res, Mode: g.defaultMode}
	if found {
		in.Domain, in.Scope, in.Highest = st.Domain, st.Scope, st.Highest
		in.LastSegment, in.Accepted, in.MigratingFrom = st.LastSegment, st.Accepted, st.MigratedFrom
		in.PrunedBelow = st.PrunedBelow
	}
	if hasMode {
		if m.Mode != 0 {
			in.Mode, in.ModeSet = m.Mode, true
		}
		in.EnforcedAt, in.EnforcedHighest = m.EnforcedAt, m.EnforcedHighest
		in.WouldRefuse, in.ShadowUnlogged = m.WouldRefuse, m.Unlogged
	}
	return in
}

// resourceOnlyKey extracts the resource of a key that names nothing else.
func (g *Guard) resourceOnlyKey(key []byte) (string, error) {
	res, rest, err := g.resourceOfKey(key)
	if err == nil && len(rest) != 0 {
		err = fmt.Errorf("%w: key of %q has %d trailing bytes", ErrCorruptRecord, res, len(rest))
	}
	return res, err
}

// scan calls fn with every record in [lower, upper).
func (g *Guard) scan(ctx context.Context, lower, upper []byte, fn func(key, value []byte) error) error {
	it, err := g.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return fmt.Errorf("fence: read: %w", err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if err := ctx.Err(); err != nil {
			return err
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("fence: read: %w", err)
		}
		if err := fn(it.Key(), v); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("fence: read: %w", err)
	}
	return nil
}

// count counts the records in [lower, upper).
func (g *Guard) count(lower, upper []byte) (int64, error) {
	var n int64
	err := g.scan(context.Background(), lower, upper, func(_, _ []byte) error { n++; return nil })
	return n, err
}
