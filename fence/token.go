package fence

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// TokenSize is the length of a token's binary encoding.
const TokenSize = 24

// Token is a fencing token: the ordered tuple (epoch number, home incarnation,
// delegation counter). F1: tokens granted for one key only grow, so a resource
// that remembers the highest token it accepted can refuse every older writer.
//
// The zero Token is below every granted token; homes start counters at 1.
type Token struct {
	Epoch       uint64
	Incarnation uint64
	Counter     uint64
}

// Compare returns -1, 0 or +1 as t is below, equal to or above u, ordering
// lexicographically by epoch, then incarnation, then counter.
func (t Token) Compare(u Token) int {
	switch {
	case t.Epoch != u.Epoch:
		return cmp3(t.Epoch, u.Epoch)
	case t.Incarnation != u.Incarnation:
		return cmp3(t.Incarnation, u.Incarnation)
	default:
		return cmp3(t.Counter, u.Counter)
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

// AppendBinary appends the 24-byte big-endian encoding of t to b. Byte order
// of encodings equals token order, so encodings can be used as sort keys.
func (t Token) AppendBinary(b []byte) ([]byte, error) {
	b = binary.BigEndian.AppendUint64(b, t.Epoch)
	b = binary.BigEndian.AppendUint64(b, t.Incarnation)
	return binary.BigEndian.AppendUint64(b, t.Counter), nil
}

// MarshalBinary returns the 24-byte encoding of t.
func (t Token) MarshalBinary() ([]byte, error) {
	return t.AppendBinary(make([]byte, 0, TokenSize))
}

// UnmarshalBinary decodes exactly TokenSize bytes.
func (t *Token) UnmarshalBinary(b []byte) error {
	if len(b) != TokenSize {
		return fmt.Errorf("%w: binary token has %d bytes, want %d", ErrBadToken, len(b), TokenSize)
	}
	t.Epoch = binary.BigEndian.Uint64(b[0:8])
	t.Incarnation = binary.BigEndian.Uint64(b[8:16])
	t.Counter = binary.BigEndian.Uint64(b[16:24])
	return nil
}

// String returns the text form "e<epoch>.i<incarnation>.c<counter>".
func (t Token) String() string {
	b := make([]byte, 0, 32)
	b = append(b, 'e')
	b = strconv.AppendUint(b, t.Epoch, 10)
	b = append(b, ".i"...)
	b = strconv.AppendUint(b, t.Incarnation, 10)
	b = append(b, ".c"...)
	b = strconv.AppendUint(b, t.Counter, 10)
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
// signs, no leading zeros, no spaces, every part present, each in uint64 range,
// so that one token has exactly one text form.
func ParseToken(s string) (Token, error) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return Token{}, fmt.Errorf("%w: %q: want e<epoch>.i<incarnation>.c<counter>", ErrBadToken, s)
	}
	var vals [3]uint64
	for i, prefix := range [3]byte{'e', 'i', 'c'} {
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
	return Token{Epoch: vals[0], Incarnation: vals[1], Counter: vals[2]}, nil
}
