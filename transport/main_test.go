package transport

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test's transports, networks and memberships are closed by the test;
// goleak then shows that Close left no goroutine behind (T4).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
