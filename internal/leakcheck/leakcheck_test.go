package leakcheck

import (
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"go.uber.org/goleak"
)

// lingerIn and lingerOutside are goroutines that stay until released: the
// first stands for memberlist's in-flight work, the second for our own.
func lingerIn(release <-chan struct{}, done chan<- struct{})      { <-release; close(done) }
func lingerOutside(release <-chan struct{}, done chan<- struct{}) { <-release; close(done) }

const lingerInName = "github.com/homelock/homelock/internal/leakcheck.lingerIn"

func TestFind(t *testing.T) {
	for _, tc := range []struct {
		name    string
		run     func(release, done chan struct{})
		stayFor time.Duration // then released
		bound   time.Duration
		wantErr bool
	}{
		{"a tail that ends within the bound", func(r, d chan struct{}) { go lingerIn(r, d) }, 300 * time.Millisecond, 5 * time.Second, false},
		{"a tail that outlives the bound", func(r, d chan struct{}) { go lingerIn(r, d) }, 2 * time.Second, 300 * time.Millisecond, true},
		{"our own goroutine, even one that would end", func(r, d chan struct{}) { go lingerOutside(r, d) }, 2 * time.Second, 5 * time.Second, true},
		{"nothing left", func(r, d chan struct{}) { close(d) }, 0, time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := goleak.IgnoreCurrent()
			release, done := make(chan struct{}), make(chan struct{})
			tc.run(release, done)
			timer := time.AfterFunc(tc.stayFor, func() { close(release) })
			defer func() {
				if timer.Stop() {
					close(release)
				}
				<-done
			}()
			err := find([]string{lingerInName}, tc.bound, before)
			if (err != nil) != tc.wantErr {
				t.Fatalf("find = %v, want an error: %v", err, tc.wantErr)
			}
		})
	}
}

// TestMemberlistProbeOutlivesShutdown is the case the package exists for: a
// node shuts down while it probes a peer that is gone. The probe goroutine
// outlives Shutdown, and Find waits for it.
func TestMemberlistProbeOutlivesShutdown(t *testing.T) {
	if testing.Short() {
		t.Skip("runs memberlist for seconds")
	}
	before := goleak.IgnoreCurrent()
	a, b := startMember(t, "a"), startMember(t, "b")
	if _, err := b.Join([]string{a.LocalNode().FullAddress().Addr}); err != nil {
		t.Fatal(err)
	}
	_ = b.Shutdown()
	// a's first probe starts within two intervals, and waits the whole
	// interval for the ack that b will not send.
	for deadline := time.Now().Add(10 * time.Second); !probing(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			_ = a.Shutdown()
			t.Fatal("a did not probe b within 10 s")
		}
	}
	_ = a.Shutdown()
	if !probing() {
		t.Fatal("the probe ended with Shutdown: nothing outlives it, and this test shows nothing")
	}
	if err := Find(before); err != nil {
		t.Fatal(err)
	}
}

func probing() bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "memberlist.(*Memberlist).probeNode")
}

func startMember(t *testing.T, name string) *memberlist.Memberlist {
	t.Helper()
	c := memberlist.DefaultLocalConfig()
	c.Name, c.BindAddr, c.BindPort, c.AdvertisePort = name, "127.0.0.1", 0, 0
	c.ProbeInterval, c.ProbeTimeout = 2*time.Second, 200*time.Millisecond
	c.LogOutput = io.Discard
	m, err := memberlist.Create(c)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
