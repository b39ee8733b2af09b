package fence

import (
	"encoding/binary"
	"fmt"
)

// The canonical encodings in this package (grants, stored records) use fixed
// field order, fixed-width integers and uint16 length prefixes. Fixed widths
// rather than varints keep one value to one encoding: Go's varint decoder
// accepts padded forms, which would let two byte strings mean one grant.

func appendU16String(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func appendU16Bytes(b []byte, s []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func appendToken(b []byte, t Token) []byte {
	return binary.BigEndian.AppendUint64(appendDelegationToken(b, t), t.Section)
}

// appendDelegationToken appends the 24 bytes of t's delegation (epoch,
// incarnation, counter): what a signed grant carries, since the home signs
// the delegation and the holder numbers its sections.
func appendDelegationToken(b []byte, t Token) []byte {
	b = binary.BigEndian.AppendUint64(b, t.Epoch)
	b = binary.BigEndian.AppendUint64(b, t.Incarnation)
	return binary.BigEndian.AppendUint64(b, t.Counter)
}

// decoder reads a canonical encoding. The first error sticks, so a caller
// reads every field and checks err once; reads after an error return zero
// values and never index out of range.
type decoder struct {
	b   []byte
	off int
	err error
	// what names the encoding in errors.
	what string
	// base is the sentinel every decoding error wraps.
	base error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s: %s", d.base, d.what, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) take(n int, field string) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || len(d.b)-d.off < n {
		d.fail("%s: truncated at byte %d", field, d.off)
		return nil
	}
	s := d.b[d.off : d.off+n]
	d.off += n
	return s
}

func (d *decoder) u8(field string) uint8 {
	s := d.take(1, field)
	if s == nil {
		return 0
	}
	return s[0]
}

func (d *decoder) u16(field string) uint16 {
	s := d.take(2, field)
	if s == nil {
		return 0
	}
	return binary.BigEndian.Uint16(s)
}

func (d *decoder) u64(field string) uint64 {
	s := d.take(8, field)
	if s == nil {
		return 0
	}
	return binary.BigEndian.Uint64(s)
}

func (d *decoder) token(field string) Token { return d.tokenOf(TokenSize, field) }

// delegationToken reads the 24 bytes appendDelegationToken writes.
func (d *decoder) delegationToken(field string) Token { return d.tokenOf(legacyTokenSize, field) }

// tokenOf reads an n-byte token encoding (n is one UnmarshalBinary takes).
func (d *decoder) tokenOf(n int, field string) Token {
	s := d.take(n, field)
	if s == nil {
		return Token{}
	}
	var t Token
	_ = t.UnmarshalBinary(s) // length checked by take
	return t
}

func (d *decoder) digest(field string) (out [32]byte) {
	copy(out[:], d.take(32, field))
	return out
}

// bytes16 reads a uint16-length-prefixed field of at most max bytes. An
// over-long field is ErrTooLarge as well as the decoder's base error.
func (d *decoder) bytes16(field string, max int) []byte {
	n := int(d.u16(field))
	if d.err != nil {
		return nil
	}
	if n > max {
		d.err = fmt.Errorf("%w: %w: %s: %s has %d bytes, max %d", d.base, ErrTooLarge, d.what, field, n, max)
		return nil
	}
	return d.take(n, field)
}

func (d *decoder) string16(field string, max int) string {
	return string(d.bytes16(field, max))
}

// finish rejects trailing bytes: an encoding is exactly one value.
func (d *decoder) finish() error {
	if d.err == nil && d.off != len(d.b) {
		d.fail("%d trailing bytes", len(d.b)-d.off)
	}
	return d.err
}
