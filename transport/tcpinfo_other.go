//go:build !linux

package transport

import "net"

// tcpInfoReadable: there is no TCP_INFO to read off Linux, so no stall
// check runs and relays start only once a sender has no open stream.
const tcpInfoReadable = false

// ackSilence has no TCP_INFO to read off Linux.
func ackSilence(*net.TCPConn) (st tcpState, ok bool) {
	return tcpState{}, false
}
