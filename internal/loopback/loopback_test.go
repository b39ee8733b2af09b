package loopback

import (
	"net"
	"strconv"
	"testing"
)

// TestAddr: addresses below the ephemeral range, distinct, and bindable; a
// port held by a listener is skipped.
func TestAddr(t *testing.T) {
	seen := map[string]bool{}
	for range 50 {
		a, err := Addr()
		if err != nil {
			t.Fatal(err)
		}
		_, p, _ := net.SplitHostPort(a)
		port, _ := strconv.Atoi(p)
		if port < low || port >= high {
			t.Fatalf("%s: port outside [%d, %d)", a, low, high)
		}
		if seen[a] {
			t.Fatalf("%s handed out twice", a)
		}
		seen[a] = true
	}
	// Hold the next port in the walk: Addr must pass over it.
	held := low + int((next.Load()+1)%(high-low))
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(held)))
	if err != nil {
		t.Skipf("port %d already taken: %v", held, err)
	}
	defer l.Close()
	a, err := Addr()
	if err != nil {
		t.Fatal(err)
	}
	if a == l.Addr().String() {
		t.Fatalf("Addr returned %s, which a listener holds", a)
	}
}
