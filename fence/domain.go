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
}

// Bind binds resource to a lock domain before its first write (F4). Binding
// again to the same domain and scope is a no-op; any other binding of a bound
// resource is ErrForeignDomain (use Migrate).
func (g *Guard) Bind(ctx context.Context, resource, domain string, scope Scope) error {
	if err := g.checkBinding(resource, domain, scope); err != nil {
		return err
	}
	unlock, err := g.lock(ctx, resource)
	if err != nil {
		return err
	}
	defer unlock()
	st, found, err := g.loadState(resource)
	if err != nil {
		return err
	}
	if found {
		if st.Domain == domain && st.Scope == scope {
			return nil
		}
		return fmt.Errorf("%w: resource %q is bound to %s domain %q, not %s domain %q", ErrForeignDomain, resource, st.Scope, st.Domain, scope, domain)
	}
	st = resourceState{Domain: domain, Scope: scope}
	return g.writeState(resource, &st)
}

// Migrate moves resource from lock domain from to lock domain to, keeping its
// highest fence. From then on grants from the old domain are ErrForeignDomain
// and grants from the new one are ErrMigrationPending until one carries a
// token above the old highest fence: the new domain's order must continue
// above the old one's (seed 004), and nothing resets the highest value (F1).
// The new domain's operator makes that hold, for instance by starting its
// epoch numbers above ResourceInfo.Highest.Epoch.
func (g *Guard) Migrate(ctx context.Context, resource, from, to string) error {
	if err := g.checkBinding(resource, to, ScopeCluster); err != nil {
		return err
	}
	unlock, err := g.lock(ctx, resource)
	if err != nil {
		return err
	}
	defer unlock()
	st, found, err := g.loadState(resource)
	if err != nil {
		return err
	}
	switch {
	case !found:
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
	return g.writeState(resource, &st)
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

func (g *Guard) writeState(resource string, st *resourceState) error {
	b := g.db.NewBatch()
	defer b.Close()
	if err := b.Set(g.stateKey(resource), st.encode(), nil); err != nil {
		return fmt.Errorf("fence: resource %q: %w", resource, err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("fence: commit resource %q: %w", resource, err)
	}
	return nil
}

// Resources lists the resources the Guard protects, sorted by name: the
// inventory that shows each resource has exactly one lock domain.
func (g *Guard) Resources(ctx context.Context) ([]ResourceInfo, error) {
	lower, upper := g.kindBounds(kindState)
	it, err := g.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, fmt.Errorf("fence: read: %w", err)
	}
	defer it.Close()
	var out []ResourceInfo
	for ok := it.First(); ok; ok = it.Next() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		res, rest, err := g.resourceOfKey(it.Key())
		if err != nil {
			return nil, err
		}
		if len(rest) != 0 {
			return nil, fmt.Errorf("%w: state key for %q has %d trailing bytes", ErrCorruptRecord, res, len(rest))
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, fmt.Errorf("fence: read: %w", err)
		}
		st, err := decodeState(v)
		if err != nil {
			return nil, fmt.Errorf("resource %q: %w", res, err)
		}
		out = append(out, ResourceInfo{
			Resource: res, Domain: st.Domain, Scope: st.Scope, Highest: st.Highest,
			LastSegment: st.LastSegment, Accepted: st.Accepted, MigratingFrom: st.MigratedFrom,
		})
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("fence: read: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Resource < out[j].Resource })
	return out, nil
}
