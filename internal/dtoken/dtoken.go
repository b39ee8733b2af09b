package dtoken

import "github.com/homelock/homelock/fence"

// T names one delegation: (epoch, home incarnation, counter).
type T struct {
	Epoch, Incarnation, Counter uint64
}

// Of is t's delegation.
func Of(t fence.Token) T { return T{Epoch: t.Epoch, Incarnation: t.Incarnation, Counter: t.Counter} }

// Token is the delegation's own token (Section 0), as messages carry it.
func (d T) Token() fence.Token {
	return fence.Token{Epoch: d.Epoch, Incarnation: d.Incarnation, Counter: d.Counter}
}

// Section is the token of the delegation's critical section s.
func (d T) Section(s uint64) fence.Token {
	return fence.Token{Epoch: d.Epoch, Incarnation: d.Incarnation, Counter: d.Counter, Section: s}
}

// Is reports whether t is exactly this delegation's own token: a token
// that names a section is not the delegation.
func (d T) Is(t fence.Token) bool { return t.Section == 0 && Of(t) == d }

// IsZero reports whether d names no delegation.
func (d T) IsZero() bool { return d == T{} }

// String is the delegation's token's text form.
func (d T) String() string { return d.Token().String() }
