package fence

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// TokenSize is the length of a token's binary encoding.
const TokenSize = 32

// legacyTokenSize is the encoding of a token before sections (epoch,
// incarnation, counter), which UnmarshalBinary still reads as section 0,
// and the width of the delegation token a signed grant carries.
const legacyTokenSize = 24

// Token is a fencing token: the ordered tuple (epoch number, home
// incarnation, delegation counter, section). F1: tokens granted for one key
// only grow, so a resource that remembers the highest token it accepted can
// refuse every older writer.
//
// The first three name a delegation, granted by the key's home; Section is
// the holder's admission sequence within it, from 1, so every critical
// section has a token of its own, above every earlier one on the key, with
// no message to the home. A delegation's own token (in the protocol's
// messages and the signed grant) has Section 0.
//
// The zero Token is below every granted token; homes start counters at 1.
type Token struct {
	Epoch       uint64
	Incarnation uint64
	Counter     uint64
	Section     uint64
}

// Compare returns -1, 0 or +1 as t is below, equal to or above u, ordering
// lexicographically by epoch, then incarnation, then counter, then section.
func (t Token) Compare(u Token) int {
	switch {
	case t.Epoch != u.Epoch:
		return cmp3(t.Epoch, u.Epoch)
	case t.Incarnation != u.Incarnation:
		return cmp3(t.Incarnation, u.Incarnation)
	case t.Counter != u.Counter:
		return cmp3(t.Counter, u.Counter)
	default:
		return cmp3(t.Section, u.Section)
	}
}

func cmp3(a, b uint64) int {
	if a < b {
		return -1
	}
	if a > b {
		return 1
	}
	return 0
}

// Less reports whether t orders before u.
func (t Token) Less(u Token) bool { return t.Compare(u) < 0 }

// IsZero reports whether t is the zero token, which no home ever grants.
func (t Token) IsZero() bool { return t == Token{} }

// Delegation is the token of the delegation t's section was admitted
// under: t with Section 0, as its signed grant names it.
func (t Token) Delegation() Token {
	t.Section = 0
	return t
}

// AppendBinary appends the 32-byte big-endian encoding of t to b. Byte order
// of encodings equals token order, so encodings can be used as sort keys.
func (t Token) AppendBinary(b []byte) ([]byte, error) {
	return appendToken(b, t), nil
}

// MarshalBinary returns the 32-byte encoding of t.
func (t Token) MarshalBinary() ([]byte, error) {
	return t.AppendBinary(make([]byte, 0, TokenSize))
}

// UnmarshalBinary decodes exactly TokenSize bytes, or the 24 bytes of a
// token encoded before sections existed, which it reads as Section 0 (its
// order among 32-byte encodings is the same: a delegation's token is below
// each of its sections').
func (t *Token) UnmarshalBinary(b []byte) error {
	if len(b) != TokenSize && len(b) != legacyTokenSize {
		return fmt.Errorf("%w: binary token has %d bytes, want %d", ErrBadToken, len(b), TokenSize)
	}
	t.Epoch = binary.BigEndian.Uint64(b[0:8])
	t.Incarnation = binary.BigEndian.Uint64(b[8:16])
	t.Counter = binary.BigEndian.Uint64(b[16:24])
	t.Section = 0
	if len(b) == TokenSize {
		t.Section = binary.BigEndian.Uint64(b[24:32])
	}
	return nil
}

// String returns the text form "e<epoch>.i<incarnation>.c<counter>.s<section>",
// without ".s<section>" for a delegation's own token (Section 0), so that
// every token has one text form.
func (t Token) String() string {
	b := make([]byte, 0, 48)
	b = append(b, 'e')
	b = strconv.AppendUint(b, t.Epoch, 10)
	b = append(b, ".i"...)
	b = strconv.AppendUint(b, t.Incarnation, 10)
	b = append(b, ".c"...)
	b = strconv.AppendUint(b, t.Counter, 10)
	if t.Section != 0 {
		b = append(b, ".s"...)
		b = strconv.AppendUint(b, t.Section, 10)
	}
	return string(b)
}

// MarshalText implements encoding.TextMarshaler.
func (t Token) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with ParseToken.
func (t *Token) UnmarshalText(b []byte) error {
	p, err := ParseToken(string(b))
	if err != nil {
		return err
	}
	*t = p
	return nil
}

// ParseToken parses the text form written by Token.String. It is strict: no
// signs, no leading zeros, no spaces, every part present, each in uint64
// range, and no ".s0" (Section 0 is written without it), so that one token
// has exactly one text form.
func ParseToken(s string) (Token, error) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 && len(parts) != 4 {
		return Token{}, fmt.Errorf("%w: %q: want e<epoch>.i<incarnation>.c<counter>[.s<section>]", ErrBadToken, s)
	}
	var vals [4]uint64
	for i, prefix := range []byte("eics")[:len(parts)] {
		p := parts[i]
		if len(p) < 2 || p[0] != prefix {
			return Token{}, fmt.Errorf("%w: %q: part %d must start with %q", ErrBadToken, s, i+1, prefix)
		}
		digits := p[1:]
		if len(digits) > 1 && digits[0] == '0' {
			return Token{}, fmt.Errorf("%w: %q: leading zero in part %d", ErrBadToken, s, i+1)
		}
		for j := 0; j < len(digits); j++ {
			if digits[j] < '0' || digits[j] > '9' {
				return Token{}, fmt.Errorf("%w: %q: part %d is not a decimal number", ErrBadToken, s, i+1)
			}
		}
		v, err := strconv.ParseUint(digits, 10, 64)
		if err != nil {
			return Token{}, fmt.Errorf("%w: %q: part %d out of range", ErrBadToken, s, i+1)
		}
		vals[i] = v
	}
	if len(parts) == 4 && vals[3] == 0 {
		return Token{}, fmt.Errorf("%w: %q: section 0 is written without its part", ErrBadToken, s)
	}
	return Token{Epoch: vals[0], Incarnation: vals[1], Counter: vals[2], Section: vals[3]}, nil
}
