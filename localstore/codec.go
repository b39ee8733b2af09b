package localstore

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/homelock/homelock/msg"
)

// The primitives every record encoding is built from. Integers that are
// usually small are uvarints, store IDs (random, full width) are 8 bytes
// big-endian, strings are a uvarint length then the bytes, and a bool is one
// byte, 0 or 1. The decoder accepts exactly what the encoder produces (minimal
// varints, no trailing bytes), so every stored value has one encoding and the
// fuzz targets can check encode(decode(b)) == b.

type encoder struct{ b []byte }

func (e *encoder) byte(v byte)         { e.b = append(e.b, v) }
func (e *encoder) uvarint(v uint64)    { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) fixed64(v uint64)    { e.b = binary.BigEndian.AppendUint64(e.b, v) }
func (e *encoder) str(s string)        { e.uvarint(uint64(len(s))); e.b = append(e.b, s...) }
func (e *encoder) ballot(b msg.Ballot) { e.uvarint(b.Counter); e.str(string(b.Node)) }

func (e *encoder) bool(v bool) {
	if v {
		e.byte(1)
	} else {
		e.byte(0)
	}
}

func (e *encoder) member(m msg.Member) {
	e.str(string(m.ID))
	e.fixed64(m.Store)
	e.str(m.Addr)
	e.uvarint(uint64(m.Version))
}

func (e *encoder) members(ms []msg.Member) {
	e.uvarint(uint64(len(ms)))
	for _, m := range ms {
		e.member(m)
	}
}

func (e *encoder) epoch(ep msg.Epoch) {
	e.uvarint(ep.Number)
	e.uvarint(uint64(ep.Caps.Ring))
	e.members(ep.Members)
}

var errTruncated = errors.New("truncated")

// decoder reads what encoder wrote. The first error sticks; later reads
// return zero values, so a record decoder checks err once at the end.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 1 {
		d.err = errTruncated
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	if n != uvarintLen(v) {
		d.fail("non-minimal varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) uint32() uint32 {
	v := d.uvarint()
	if v > 1<<32-1 {
		d.fail("value %d does not fit 32 bits", v)
		return 0
	}
	return uint32(v)
}

func (d *decoder) fixed64() uint64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 8 {
		d.err = errTruncated
		return 0
	}
	v := binary.BigEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decoder) str() string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)) {
		d.err = errTruncated
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) bool() bool {
	switch v := d.byte(); v {
	case 0:
		return false
	case 1:
		return true
	default:
		d.fail("bad bool byte %#x", v)
		return false
	}
}

func (d *decoder) ballot() msg.Ballot {
	return msg.Ballot{Counter: d.uvarint(), Node: msg.NodeID(d.str())}
}

func (d *decoder) member() msg.Member {
	return msg.Member{ID: msg.NodeID(d.str()), Store: d.fixed64(), Addr: d.str(), Version: d.uint32()}
}

// members decodes a counted list; an empty list decodes as nil.
func (d *decoder) members() []msg.Member {
	n := d.uvarint()
	if d.err != nil || n == 0 {
		return nil
	}
	// Each member takes at least 11 bytes; checking the count against what
	// is left keeps a forged count from allocating much.
	if n > uint64(len(d.b))/11 {
		d.err = errTruncated
		return nil
	}
	ms := make([]msg.Member, 0, n)
	for range n {
		ms = append(ms, d.member())
	}
	if d.err != nil {
		return nil
	}
	return ms
}

func (d *decoder) epoch() msg.Epoch {
	return msg.Epoch{Number: d.uvarint(), Caps: msg.Caps{Ring: d.uint32()}, Members: d.members()}
}

// version reads a record's leading version byte and fails on any other.
func (d *decoder) version(want byte) {
	if v := d.byte(); d.err == nil && v != want {
		d.fail("unknown record version %d (this build reads %d)", v, want)
	}
}

// finish returns the sticky error, or an error if bytes are left over.
func (d *decoder) finish() error {
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	return d.err
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
