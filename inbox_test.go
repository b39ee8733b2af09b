package homelock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/homelock/homelock/msg"
)

// The inbox gives envelopes back in the order they came, in batches, and
// reuses its arrays.
func TestInboxOrder(t *testing.T) {
	var b inbox
	require.False(t, b.waiting())
	require.Empty(t, b.take())
	env := func(seq uint64) msg.Envelope {
		return msg.Envelope{FromInc: seq, Body: msg.Acquire{Key: "k"}}
	}
	next := uint64(1)
	for round := range 3 {
		for i := range round + 2 {
			require.Equal(t, i+1, b.push(env(next+uint64(i))))
		}
		require.True(t, b.waiting())
		batch := b.take()
		require.False(t, b.waiting())
		require.Len(t, batch, round+2)
		for _, e := range batch {
			require.Equal(t, next, e.FromInc, "envelopes out of order")
			next++
		}
		b.giveBack(batch)
		require.Nil(t, batch[0].Body, "a batch given back keeps no envelope alive")
	}
}

// The transport's handler does not wait for a step that holds the locks:
// it leaves the envelope, and the step steps it before letting go.
func TestReceiveDoesNotWaitForTheLocks(t *testing.T) {
	n := readyNode(t)
	n.lockAll()
	returned := make(chan struct{})
	go func() {
		n.receive(msg.Envelope{From: msg.Member{ID: "stranger", Store: 9, Version: 1}, Body: msg.Acquire{Key: "k"}})
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		n.unlockAll()
		t.Fatal("receive waited for the step locks")
	}
	require.True(t, n.in.waiting(), "the envelope was stepped while another step held the locks")
	n.unlockAll()
	require.False(t, n.in.waiting(), "unlockAll let the locks go with an envelope left in the inbox")
}

// Past inboxCap waiting envelopes the handler waits for the locks (the
// transport's flow control then holds the sender back) and counts it.
func TestReceiveWaitsWhenTheInboxIsFull(t *testing.T) {
	n := readyNode(t)
	env := msg.Envelope{From: msg.Member{ID: "stranger", Store: 9, Version: 1}, Body: msg.Acquire{Key: "k"}}
	n.lockAll()
	for range inboxCap {
		n.in.push(env)
	}
	returned := make(chan struct{})
	go func() {
		n.receive(env)
		close(returned)
	}()
	select {
	case <-returned:
		n.unlockAll()
		t.Fatal("receive returned with the inbox full and the locks held")
	case <-time.After(100 * time.Millisecond):
	}
	n.unlockAll()
	<-returned
	st := n.Stats()
	require.Equal(t, uint64(1), st.InboxFull)
	require.Zero(t, st.Inbox)
}
