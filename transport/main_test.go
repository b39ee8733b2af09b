package transport

import (
	"testing"

	"github.com/homelock/homelock/internal/leakcheck"
)

// Every test's transports, networks and memberships are closed by the test;
// leakcheck then shows that Close left no goroutine behind (T4).
func TestMain(m *testing.M) {
	leakcheck.VerifyTestMain(m)
}
