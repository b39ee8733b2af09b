package transport

import (
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// ackSilence reads tc's TCP_INFO: how long ago the peer last acknowledged
// anything, and whether TCP is retransmitting unacknowledged data (a
// retransmission timeout fired, at least 200 ms without an answer). ok is
// false when the reading failed.
func ackSilence(tc *net.TCPConn) (silent time.Duration, retransmitting, ok bool) {
	raw, err := tc.SyscallConn()
	if err != nil {
		return 0, false, false
	}
	var info *unix.TCPInfo
	cerr := raw.Control(func(fd uintptr) {
		info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	})
	if cerr != nil || err != nil {
		return 0, false, false
	}
	silent, retransmitting = stallOf(info.Unacked, info.Retransmits, info.Last_ack_recv)
	return silent, retransmitting, true
}
