//go:build !linux

package transport

import "net"

// ackSilence is nil off Linux: there is no TCP_INFO to read, so no stall
// check runs and relays start only once a sender has no open stream.
var ackSilence func(*net.TCPConn) (tcpState, bool)
