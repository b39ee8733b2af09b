package fence

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"os"
	"slices"
	"sync"
	"sync/atomic"
)

// Key ring bounds. A key ring is configuration, not data: these are far above
// any sane rotation schedule and keep a hostile file from costing memory.
const (
	// MaxKeys bounds the active keys.
	MaxKeys = 16
	// MaxRetiredKeys bounds the retired key IDs remembered so that a retired
	// ID is never reused with another secret.
	MaxRetiredKeys = 1024
	// MaxRevokedEpochs bounds the revocation list; RevokeBelow covers ranges.
	MaxRevokedEpochs = 4096
	// MaxKeyIDLen bounds a key ID.
	MaxKeyIDLen = 64
	// MinSecretLen and MaxSecretLen bound an HMAC secret: at least the
	// SHA-256 output size, at most one SHA-256 block plus change.
	MinSecretLen = 32
	MaxSecretLen = 128
	// MaxKeyRingFileSize bounds a key ring file.
	MaxKeyRingFileSize = 1 << 20
)

// KeyRing holds the HMAC keys that sign and verify grants and the issuer
// epochs that are revoked. The newest active key signs; every active key
// verifies; a retired key verifies nothing, so retiring a key is how a leaked
// or rotated-out key stops being trusted. Safe for concurrent use.
type KeyRing struct {
	mu sync.RWMutex
	// keys are the active keys, oldest first; the last one signs.
	keys    []*ringKey
	retired map[string]struct{}
	revoked map[uint64]struct{}
	// revokedBelow refuses every issuer epoch below it; it only rises.
	revokedBelow uint64
	// gen counts changes that can turn a verified grant into a refused one
	// (retire, revoke); a cached verification is valid only in its gen.
	gen atomic.Uint64
}

type ringKey struct {
	id string
	// prefix is what every MAC under this key starts with: the context
	// string, the key ID's length and the key ID.
	prefix []byte
	// macs holds hmac.Hash values already keyed with this key's secret, so a
	// verification does not redo the key schedule.
	macs sync.Pool
}

// NewKeyRing returns an empty key ring.
func NewKeyRing() *KeyRing {
	return &KeyRing{retired: map[string]struct{}{}, revoked: map[uint64]struct{}{}}
}

func validKeyID(id string) error {
	if id == "" || len(id) > MaxKeyIDLen {
		return fmt.Errorf("%w: key ID %q must have 1 to %d bytes", ErrBadKey, id, MaxKeyIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("%w: key ID %q: only letters, digits, '-', '_' and '.'", ErrBadKey, id)
		}
	}
	return nil
}

// Add adds an active key; it becomes the signing key. An ID is used once: a
// retired or present ID is refused.
func (r *KeyRing) Add(id string, secret []byte) error {
	if err := validKeyID(id); err != nil {
		return err
	}
	if len(secret) < MinSecretLen || len(secret) > MaxSecretLen {
		return fmt.Errorf("%w: key %q: secret has %d bytes, want %d to %d", ErrBadKey, id, len(secret), MinSecretLen, MaxSecretLen)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.retired[id]; ok {
		return fmt.Errorf("%w: key %q was retired; IDs are never reused", ErrBadKey, id)
	}
	if r.find(id) != nil {
		return fmt.Errorf("%w: key %q already present", ErrBadKey, id)
	}
	if len(r.keys) >= MaxKeys {
		return fmt.Errorf("%w: %d active keys, retire one first", ErrKeyRingFull, len(r.keys))
	}
	s := bytes.Clone(secret)
	k := &ringKey{id: id, prefix: append(append([]byte(macContext), byte(len(id))), id...)}
	k.macs.New = func() any { return hmac.New(sha256.New, s) }
	r.keys = append(r.keys, k)
	return nil
}

// Retire stops trusting key id: grants it signed no longer verify.
func (r *KeyRing) Retire(id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := slices.IndexFunc(r.keys, func(k *ringKey) bool { return k.id == id })
	if i < 0 {
		return fmt.Errorf("%w: key %q is not active", ErrBadKey, id)
	}
	if len(r.retired) >= MaxRetiredKeys {
		return fmt.Errorf("%w: %d retired key IDs", ErrKeyRingFull, len(r.retired))
	}
	r.keys = slices.Delete(r.keys, i, i+1)
	r.retired[id] = struct{}{}
	r.gen.Add(1)
	return nil
}

// Revoke refuses every grant whose IssuerEpoch is e from now on.
func (r *KeyRing) Revoke(e uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.revoked[e]; ok || e < r.revokedBelow {
		return nil
	}
	if len(r.revoked) >= MaxRevokedEpochs {
		return fmt.Errorf("%w: %d revoked issuer epochs, use RevokeBelow", ErrKeyRingFull, len(r.revoked))
	}
	r.revoked[e] = struct{}{}
	r.gen.Add(1)
	return nil
}

// RevokeBelow refuses every grant whose IssuerEpoch is below e. The floor only
// rises; entries it covers are dropped from the list.
func (r *KeyRing) RevokeBelow(e uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e <= r.revokedBelow {
		return
	}
	r.revokedBelow = e
	r.gen.Add(1)
	for x := range r.revoked {
		if x < e {
			delete(r.revoked, x)
		}
	}
}

// IsRevoked reports whether issuer epoch e is revoked.
func (r *KeyRing) IsRevoked(e uint64) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.isRevoked(e)
}

func (r *KeyRing) isRevoked(e uint64) bool {
	if e < r.revokedBelow {
		return true
	}
	_, ok := r.revoked[e]
	return ok
}

// SigningKeyID returns the ID of the key Sign uses, or "" if none is active.
func (r *KeyRing) SigningKeyID() string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if len(r.keys) == 0 {
		return ""
	}
	return r.keys[len(r.keys)-1].id
}

func (r *KeyRing) find(id string) *ringKey {
	for _, k := range r.keys {
		if k.id == id {
			return k
		}
	}
	return nil
}

// mac computes the grant MAC: HMAC-SHA256 over a context string, the key ID
// and the SHA-256 digest of the canonical encoding. The key ID is inside the
// MAC so an envelope cannot be relabelled to another key.
func (k *ringKey) mac(digest *[32]byte, out *[32]byte) {
	h := k.macs.Get().(hash.Hash)
	h.Reset()
	h.Write(k.prefix)
	h.Write(digest[:])
	h.Sum(out[:0])
	k.macs.Put(h)
}

const macContext = "homelock lockGrant.v1 mac\x00"

// keyRingFile is the on-disk key ring: JSON, keys oldest first, secrets in
// standard base64. The last key that is not retired signs.
//
//	{
//	  "keys": [
//	    {"id": "k2026-06", "retired": true},
//	    {"id": "k2026-07", "secret": "3q2+7w...=="}
//	  ],
//	  "revokedIssuerEpochs": [3, 7],
//	  "revokedBelow": 2
//	}
type keyRingFile struct {
	Keys []struct {
		ID      string `json:"id"`
		Secret  string `json:"secret,omitempty"`
		Retired bool   `json:"retired,omitempty"`
	} `json:"keys"`
	RevokedIssuerEpochs []uint64 `json:"revokedIssuerEpochs,omitempty"`
	RevokedBelow        uint64   `json:"revokedBelow,omitempty"`
}

// LoadKeyRing reads a key ring file (see ParseKeyRing for the format).
func LoadKeyRing(path string) (*KeyRing, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("fence: key ring %s: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxKeyRingFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("fence: key ring %s: %w", path, err)
	}
	r, err := ParseKeyRing(data)
	if err != nil {
		return nil, fmt.Errorf("key ring %s: %w", path, err)
	}
	return r, nil
}

// ParseKeyRing parses a key ring file: a JSON object with "keys" (each {"id",
// "secret" in standard base64, "retired"}; the last active key signs, and
// every active key verifies, so a new key listed first only verifies), optional
// "revokedIssuerEpochs" and "revokedBelow". Unknown fields and trailing data
// are refused, so a typo in a field name cannot silently drop a revocation.
func ParseKeyRing(data []byte) (*KeyRing, error) {
	if len(data) > MaxKeyRingFileSize {
		return nil, fmt.Errorf("%w: key ring file has %d bytes, max %d", ErrTooLarge, len(data), MaxKeyRingFileSize)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f keyRingFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: key ring file: %v", ErrBadKey, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: key ring file: trailing data", ErrBadKey)
	}
	r := NewKeyRing()
	for _, k := range f.Keys {
		if k.Retired {
			if err := validKeyID(k.ID); err != nil {
				return nil, err
			}
			if _, dup := r.retired[k.ID]; dup || r.find(k.ID) != nil {
				return nil, fmt.Errorf("%w: key %q listed twice", ErrBadKey, k.ID)
			}
			if len(r.retired) >= MaxRetiredKeys {
				return nil, fmt.Errorf("%w: more than %d retired key IDs", ErrKeyRingFull, MaxRetiredKeys)
			}
			r.retired[k.ID] = struct{}{}
			continue
		}
		secret, err := base64.StdEncoding.Strict().DecodeString(k.Secret)
		if err != nil {
			return nil, fmt.Errorf("%w: key %q: secret is not standard base64", ErrBadKey, k.ID)
		}
		if err := r.Add(k.ID, secret); err != nil {
			return nil, err
		}
	}
	r.RevokeBelow(f.RevokedBelow)
	for _, e := range f.RevokedIssuerEpochs {
		if err := r.Revoke(e); err != nil {
			return nil, err
		}
	}
	return r, nil
}
