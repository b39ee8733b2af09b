package homelock

import "golang.org/x/sys/unix"

// readBootClock reads CLOCK_BOOTTIME, which keeps counting while the machine is
// suspended.
func readBootClock() (int64, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0, false
	}
	return ts.Nano(), true
}
