//go:build !linux

package homelock

// readBootClock: no clock that counts through a suspend is read outside Linux.
func readBootClock() (int64, bool) { return 0, false }
