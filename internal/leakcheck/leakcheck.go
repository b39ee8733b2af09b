package leakcheck

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TailBound is how long memberlist's in-flight work may outlive Shutdown in
// this repository's tests: LocalTimings probe every second, which awareness
// stretches to at most 8 s, and their TCP timeout is 1 s.
const TailBound = 10 * time.Second

// memberlistTails are the functions memberlist runs work in that Shutdown
// does not wait for: the scheduled probe, gossip and push/pull (under
// triggerFunc and pushPullTrigger), the probe's TCP fallback, the
// indirect-ping relay (func2 in memberlist v0.7.0: the goroutine that waits
// for the relayed ack), and a stream connection being served.
var memberlistTails = []string{
	"github.com/hashicorp/memberlist.(*Memberlist).triggerFunc",
	"github.com/hashicorp/memberlist.(*Memberlist).pushPullTrigger",
	"github.com/hashicorp/memberlist.(*Memberlist).sendPingAndWaitForAck",
	"github.com/hashicorp/memberlist.(*Memberlist).handleIndirectPing.func2",
	"github.com/hashicorp/memberlist.(*Memberlist).handleConn",
}

// Find returns an error naming the goroutines left running: at once for
// any outside memberlistTails, after TailBound for those inside.
func Find(opts ...goleak.Option) error { return find(memberlistTails, TailBound, opts...) }

func find(tails []string, bound time.Duration, opts ...goleak.Option) error {
	now := slices.Clip(opts) // the caller's array stays as it was
	for _, f := range tails {
		now = append(now, goleak.IgnoreAnyFunction(f))
	}
	if err := goleak.Find(now...); err != nil {
		return err
	}
	deadline := time.Now().Add(bound)
	for {
		err := goleak.Find(opts...)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still running %v after their owner closed: %w", bound, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// VerifyNone fails t if Find finds goroutines left running.
func VerifyNone(t testing.TB, opts ...goleak.Option) {
	t.Helper()
	if err := Find(opts...); err != nil {
		t.Error(err)
	}
}

// VerifyTestMain runs the tests, then fails the binary if they passed but
// Find finds goroutines left running.
func VerifyTestMain(m *testing.M, opts ...goleak.Option) {
	code := m.Run()
	if code == 0 {
		if err := Find(opts...); err != nil {
			fmt.Fprintf(os.Stderr, "leakcheck: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
