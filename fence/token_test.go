package fence

import (
	"bytes"
	"math"
	"testing"
)

func TestTokenCompare(t *testing.T) {
	for _, tc := range []struct {
		a, b Token
		want int
	}{
		{tok(0, 0, 0), tok(0, 0, 0), 0},
		{tok(1, 2, 3), tok(1, 2, 3), 0},
		{tok(1, 2, 3), tok(1, 2, 4), -1},
		{tok(1, 2, 4), tok(1, 2, 3), 1},
		{tok(1, 2, 99), tok(1, 3, 1), -1},  // incarnation outranks counter
		{tok(1, 99, 99), tok(2, 1, 1), -1}, // epoch outranks both
		{tok(2, 0, 0), tok(1, math.MaxUint64, math.MaxUint64), 1},
		{tok(0, 0, 1), tok(0, 0, 0), 1},
		{tok(math.MaxUint64, 0, 0), tok(math.MaxUint64-1, math.MaxUint64, math.MaxUint64), 1},
		// Sections order within their delegation, below the next one.
		{sec(1, 2, 3, 1), sec(1, 2, 3, 2), -1},
		{tok(1, 2, 3), sec(1, 2, 3, 1), -1}, // the delegation's own token first
		{sec(1, 2, 3, math.MaxUint64), tok(1, 2, 4), -1},
		{sec(1, 2, 3, 7), sec(1, 2, 3, 7), 0},
	} {
		check.Equal(t, tc.want, tc.a.Compare(tc.b), "%s vs %s", tc.a, tc.b)
		check.Equal(t, -tc.want, tc.b.Compare(tc.a), "%s vs %s", tc.b, tc.a)
		check.Equal(t, tc.want < 0, tc.a.Less(tc.b))
	}
	check.True(t, Token{}.IsZero())
	check.False(t, tok(0, 0, 1).IsZero())
	check.False(t, sec(0, 0, 0, 1).IsZero())
	check.Equal(t, tok(1, 2, 3), sec(1, 2, 3, 9).Delegation())
}

func sec(e, i, c, s uint64) Token { return Token{Epoch: e, Incarnation: i, Counter: c, Section: s} }

func TestTokenTextRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		tok  Token
		text string
	}{
		{tok(12, 3, 8842), "e12.i3.c8842"},
		{tok(0, 0, 0), "e0.i0.c0"},
		{tok(math.MaxUint64, math.MaxUint64, math.MaxUint64), "e18446744073709551615.i18446744073709551615.c18446744073709551615"},
		{sec(768, 4, 7, 2), "e768.i4.c7.s2"},
		{sec(1, 1, 1, math.MaxUint64), "e1.i1.c1.s18446744073709551615"},
	} {
		check.Equal(t, tc.text, tc.tok.String())
		got, err := ParseToken(tc.text)
		must.NoError(t, err)
		check.Equal(t, tc.tok, got)
		var u Token
		must.NoError(t, u.UnmarshalText([]byte(tc.text)))
		check.Equal(t, tc.tok, u)
		m, _ := tc.tok.MarshalText()
		check.Equal(t, tc.text, string(m))
	}
}

func TestParseTokenRejects(t *testing.T) {
	for _, s := range []string{
		"", "e1.i2", "e1.i2.c3.d4", "e1..c3", "1.2.3", "i1.e2.c3", "e1.i2.x3",
		"e01.i2.c3", "e1.i00.c3", "e1.i2.c03", // leading zeros
		"e+1.i2.c3", "e-1.i2.c3", "e1.i+2.c3", // signs
		" e1.i2.c3", "e1.i2.c3 ", "e1. i2.c3", "e1.i2.c 3", // spaces
		"e.i2.c3", "e1.i.c3", "e1.i2.c", // missing numbers
		"e18446744073709551616.i0.c0", "e0.i0.c99999999999999999999", // overflow
		"e1.i2.c3\n", "e0x1.i2.c3", "e1_0.i2.c3", "E1.I2.C3", "e１.i2.c3",
		"e1.i2.c3.s0", "e1.i2.c3.s01", "e1.i2.c3.s", "e1.i2.c3.t4", "e1.i2.c3.s4.s5", "e1.i2.c3.s-1", // sections
	} {
		_, err := ParseToken(s)
		check.ErrorIs(t, err, ErrBadToken, "%q", s)
	}
}

func TestTokenBinary(t *testing.T) {
	x := sec(0x0102030405060708, 0x1112131415161718, 0x2122232425262728, 0x3132333435363738)
	b, err := x.MarshalBinary()
	must.NoError(t, err)
	must.Len(t, b, TokenSize)
	legacy := []byte{1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28}
	check.Equal(t, append(bytes.Clone(legacy), 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38), b)
	var y Token
	must.NoError(t, y.UnmarshalBinary(b))
	check.Equal(t, x, y)
	// A token encoded before sections reads as its delegation (Section 0).
	must.NoError(t, y.UnmarshalBinary(legacy))
	check.Equal(t, x.Delegation(), y)
	for _, n := range []int{0, 1, 23, 25, 31, 33, 48} {
		check.ErrorIs(t, y.UnmarshalBinary(make([]byte, n)), ErrBadToken, "%d bytes", n)
	}
}

func FuzzTokenText(f *testing.F) {
	for _, s := range []string{"e12.i3.c8842", "e0.i0.c0", "e01.i1.c1", "e1.i2.c3.", "e18446744073709551616.i0.c0", "e+1.i1.c1", "e768.i4.c7.s2", "e1.i1.c1.s0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		x, err := ParseToken(s)
		if err != nil {
			return
		}
		// One token, one text form: anything accepted is exactly what String
		// writes, and it parses back to the same token.
		if x.String() != s {
			t.Fatalf("ParseToken(%q) = %s, which prints differently", s, x)
		}
		y, err := ParseToken(x.String())
		if err != nil || y != x {
			t.Fatalf("round trip of %s: %v %v", x, y, err)
		}
	})
}

func FuzzTokenBinary(f *testing.F) {
	f.Add(make([]byte, TokenSize), bytes.Repeat([]byte{0xff}, TokenSize))
	f.Add([]byte("abcdefghijklmnopqrstuvwx"), []byte("abcdefghijklmnopqrstuvwy"))
	f.Add([]byte{1}, []byte{})
	f.Add([]byte("abcdefghijklmnopqrstuvwx"), []byte("abcdefghijklmnopqrstuvwx\x00\x00\x00\x00\x00\x00\x00\x01"))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		var x, y Token
		ex, ey := x.UnmarshalBinary(a), y.UnmarshalBinary(b)
		ok := func(n int) bool { return n == TokenSize || n == legacyTokenSize }
		if (ex == nil) != ok(len(a)) || (ey == nil) != ok(len(b)) {
			t.Fatalf("UnmarshalBinary accepted a length other than %d or %d, or refused one of them", TokenSize, legacyTokenSize)
		}
		if ex != nil || ey != nil {
			return
		}
		// A legacy encoding is its token's first 24 bytes: reading it as
		// Section 0 keeps byte order equal to token order, a delegation's
		// token sorting just below its sections'.
		if len(a) == legacyTokenSize {
			a = append(bytes.Clone(a), make([]byte, 8)...)
		}
		if len(b) == legacyTokenSize {
			b = append(bytes.Clone(b), make([]byte, 8)...)
		}
		// Encodings are sort keys: byte order equals token order.
		if got, want := bytes.Compare(a, b), x.Compare(y); got != want {
			t.Fatalf("bytes.Compare = %d, Token.Compare = %d for %s vs %s", got, want, x, y)
		}
		xb, _ := x.MarshalBinary()
		if !bytes.Equal(xb, a) {
			t.Fatalf("binary round trip of %x gave %x", a, xb)
		}
		if p, err := ParseToken(x.String()); err != nil || p != x {
			t.Fatalf("text round trip of %s: %v %v", x, p, err)
		}
	})
}

func BenchmarkTokenCompare(b *testing.B) {
	x, y := tok(7, 3, 1000), tok(7, 3, 1001)
	n := 0
	for b.Loop() {
		n += x.Compare(y)
	}
	_ = n
}

func BenchmarkTokenEncode(b *testing.B) {
	x := tok(7, 3, 1000)
	buf := make([]byte, 0, TokenSize)
	for b.Loop() {
		buf, _ = x.AppendBinary(buf[:0])
	}
}
