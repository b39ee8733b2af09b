package transport

import (
	"net"

	"golang.org/x/sys/unix"
)

// ackSilence reads tc's TCP_INFO (stallOf). ok is false when the reading
// failed.
func ackSilence(tc *net.TCPConn) (st tcpState, ok bool) {
	raw, err := tc.SyscallConn()
	if err != nil {
		return tcpState{}, false
	}
	var info *unix.TCPInfo
	cerr := raw.Control(func(fd uintptr) {
		info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	})
	if cerr != nil || err != nil {
		return tcpState{}, false
	}
	return stallOf(info.Unacked, info.Retransmits, info.Last_ack_recv), true
}
