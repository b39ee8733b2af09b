package fence

import (
	"sync"
)

// verifiedCache remembers grants this Guard verified, keyed by their exact
// signed bytes, so the many segments written under one grant pay for one
// MAC. A hit is the same bytes verified before under the same key ring
// generation (no key retired, no epoch revoked since), so it has the same
// outcome as verifying again (F3 unchanged). Bounded; an arbitrary entry is
// dropped when full.
type verifiedCache struct {
	mu      sync.Mutex
	entries map[string]verifiedGrant
}

type verifiedGrant struct {
	gen   uint64
	grant Grant
	root  [32]byte
}

const verifiedCacheSize = 4096

// verify returns the grant and its operation root.
func (c *verifiedCache) verify(r *KeyRing, signed []byte) (Grant, [32]byte, error) {
	gen := r.gen.Load()
	c.mu.Lock()
	v, ok := c.entries[string(signed)]
	c.mu.Unlock()
	if ok && v.gen == gen {
		return v.grant, v.root, nil
	}
	g, err := r.Verify(signed)
	if err != nil {
		return Grant{}, [32]byte{}, err
	}
	v = verifiedGrant{gen: gen, grant: g, root: g.Root()}
	c.mu.Lock()
	if c.entries == nil {
		c.entries = make(map[string]verifiedGrant)
	}
	if len(c.entries) >= verifiedCacheSize {
		for k := range c.entries {
			delete(c.entries, k)
			break
		}
	}
	c.entries[string(signed)] = v
	c.mu.Unlock()
	return g, v.root, nil
}
