//go:build !linux

package transport

import (
	"net"
	"time"
)

// ackSilence has no TCP_INFO to read off Linux: relays start only once a
// sender has no open stream.
func ackSilence(*net.TCPConn) (silent time.Duration, retransmitting, ok bool) {
	return 0, false, false
}
