package delegation

import (
	"testing"
	"time"

	"github.com/homelock/homelock/msg"
)

// lockAsks queues locker 1 for key on m (a second's wait, silentFor
// silent) and returns the Acquire it sends, the one message it must send.
func lockAsks(tb testing.TB, m *Machine, now time.Time, key string, silent time.Duration) msg.Acquire {
	tb.Helper()
	m.Lock(now, key, 1, now.Add(time.Second), 0, silent)
	out := m.Ready()
	if len(out.Msgs) != 1 {
		tb.Fatalf("Lock sent %d messages, want one Acquire", len(out.Msgs))
	}
	a, ok := out.Msgs[0].Body.(msg.Acquire)
	if !ok {
		tb.Fatalf("Lock sent %T, want an Acquire", out.Msgs[0].Body)
	}
	return a
}
