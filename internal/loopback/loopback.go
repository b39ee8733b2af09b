package loopback

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
)

// The ports Addr chooses from: below the default ephemeral range.
const (
	low  = 20000
	high = 32000
)

// next is the walk's position; it starts at a per-process offset.
var next = func() *atomic.Uint32 {
	var n atomic.Uint32
	n.Store(uint32(os.Getpid()) * 7919 % (high - low))
	return &n
}()

// Addr returns "127.0.0.1:port" for a port on which a TCP and a UDP
// listener could both bind a moment ago, and that no other Addr of this
// process returned recently (it walks the range).
func Addr() (string, error) {
	for range high - low {
		port := low + int(next.Add(1)%(high-low))
		if free(port) {
			return fmt.Sprintf("127.0.0.1:%d", port), nil
		}
	}
	return "", errors.New("loopback: no free port between 20000 and 32000")
}

func free(port int) bool {
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	defer l.Close()
	p, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	p.Close()
	return true
}
