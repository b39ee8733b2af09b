package transport

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/homelock/homelock/msg"
)

// inbox collects what a Handler receives.
type inbox struct {
	mu   sync.Mutex
	envs []msg.Envelope
	at   []time.Time
	more chan struct{}
}

func newInbox() *inbox { return &inbox{more: make(chan struct{}, 1)} }

func (b *inbox) handle(env msg.Envelope) {
	b.mu.Lock()
	b.envs = append(b.envs, env)
	b.at = append(b.at, time.Now())
	b.mu.Unlock()
	select {
	case b.more <- struct{}{}:
	default:
	}
}

func (b *inbox) snapshot() []msg.Envelope {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.envs)
}

func (b *inbox) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.envs)
}

// waitLen waits until at least n envelopes arrived, or fails after timeout.
func (b *inbox) waitLen(t *testing.T, n int, timeout time.Duration) []msg.Envelope {
	t.Helper()
	deadline := time.After(timeout)
	for {
		if envs := b.snapshot(); len(envs) >= n {
			return envs
		}
		select {
		case <-b.more:
		case <-deadline:
			t.Fatalf("received %d envelopes, want %d within %s", b.len(), n, timeout)
		}
	}
}

// quiet asserts that nothing more than n arrives within d.
func (b *inbox) quiet(t *testing.T, n int, d time.Duration) {
	t.Helper()
	time.Sleep(d)
	if got := b.len(); got != n {
		t.Fatalf("received %d envelopes, want %d", got, n)
	}
}

// from filters the envelopes sent by id.
func from(envs []msg.Envelope, id msg.NodeID) []msg.Envelope {
	var out []msg.Envelope
	for _, e := range envs {
		if e.From.ID == id {
			out = append(out, e)
		}
	}
	return out
}

// numbered is an envelope from self carrying sequence number n (as a Renewal
// nonce), for ordering checks.
func numbered(self msg.Member, to msg.NodeID, n uint64) msg.Envelope {
	return msg.Envelope{From: self, To: to, Epoch: 1, Body: msg.Renewal{Nonce: n}}
}

// checkOrdered fails unless envs' nonces are strictly increasing; with
// gapless they must also be 0, 1, 2, ...
func checkOrdered(t *testing.T, envs []msg.Envelope, gapless bool) {
	t.Helper()
	for i, e := range envs {
		n := e.Body.(msg.Renewal).Nonce
		if gapless && n != uint64(i) {
			t.Fatalf("envelope %d has nonce %d", i, n)
		}
		if i > 0 && n <= envs[i-1].Body.(msg.Renewal).Nonce {
			t.Fatalf("envelope %d (nonce %d) after nonce %d: reordered", i, n, envs[i-1].Body.(msg.Renewal).Nonce)
		}
	}
}
