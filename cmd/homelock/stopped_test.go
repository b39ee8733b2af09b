package main

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// stoppable fails once polled enough times.
type stoppable struct {
	polls, failAt atomic.Int32
}

var errStopped = errors.New("store failed")

func (s *stoppable) Err() error {
	if s.polls.Add(1) >= s.failAt.Load() && s.failAt.Load() > 0 {
		return errStopped
	}
	return nil
}

// homelock node runs until its signal, or until its node stops for good on
// its own: then it returns that error, and the command exits 1.
func TestUntilStopped(t *testing.T) {
	n := &stoppable{}
	n.failAt.Store(3)
	start := time.Now()
	if err := untilStopped(context.Background(), n); !errors.Is(err, errStopped) {
		t.Fatalf("untilStopped = %v, want the node's error", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("noticed the stop after %v", took)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- untilStopped(ctx, &stoppable{}) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("untilStopped after the signal = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("untilStopped did not return after its context ended")
	}
}
