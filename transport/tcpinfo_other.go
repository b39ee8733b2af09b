//go:build !linux

package transport

import "net"

// ackSilence has no TCP_INFO to read off Linux: relays start only once a
// sender has no open stream.
func ackSilence(*net.TCPConn) (st tcpState, ok bool) {
	return tcpState{}, false
}
