package homelock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestHookContext(t *testing.T) {
	type key struct{}
	parentOf := func() (context.Context, context.CancelFunc) {
		return context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	}
	closed := func(c *hookContext) bool {
		select {
		case <-c.Done():
			return true
		default:
			return false
		}
	}

	t.Run("deadline without Done: Err sees it and closes Done", func(t *testing.T) {
		parent, stop := parentOf()
		defer stop()
		c := newHookContext(parent, 20*time.Millisecond)
		defer c.cancel()
		require.NoError(t, c.Err())
		require.Equal(t, "v", c.Value(key{}))
		dl, ok := c.Deadline()
		require.True(t, ok)
		require.WithinDuration(t, time.Now().Add(20*time.Millisecond), dl, 20*time.Millisecond)
		time.Sleep(30 * time.Millisecond)
		require.ErrorIs(t, c.Err(), context.DeadlineExceeded)
		require.True(t, closed(c))
	})
	t.Run("deadline after Done: the timer closes Done", func(t *testing.T) {
		parent, stop := parentOf()
		defer stop()
		c := newHookContext(parent, 20*time.Millisecond)
		defer c.cancel()
		select {
		case <-c.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("Done not closed at the deadline")
		}
		require.ErrorIs(t, c.Err(), context.DeadlineExceeded)
	})
	t.Run("parent ends: Done closes with the parent's error", func(t *testing.T) {
		parent, stop := parentOf()
		c := newHookContext(parent, time.Hour)
		defer c.cancel()
		done := c.Done()
		require.False(t, closed(c))
		stop()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("Done not closed when the parent ended")
		}
		require.ErrorIs(t, c.Err(), context.Canceled)
	})
	t.Run("parent already ended", func(t *testing.T) {
		parent, stop := parentOf()
		stop()
		c := newHookContext(parent, time.Hour)
		defer c.cancel()
		require.ErrorIs(t, c.Err(), context.Canceled)
		require.True(t, closed(c))
	})
	t.Run("cancel ends it and keeps the first error", func(t *testing.T) {
		parent, stop := parentOf()
		defer stop()
		c := newHookContext(parent, time.Hour)
		_ = c.Done()
		c.cancel()
		require.True(t, closed(c))
		require.True(t, errors.Is(c.Err(), context.Canceled))
		c.cancel() // idempotent
	})
	t.Run("derived contexts follow it", func(t *testing.T) {
		parent, stop := parentOf()
		defer stop()
		c := newHookContext(parent, 20*time.Millisecond)
		defer c.cancel()
		child, cancel := context.WithCancel(c)
		defer cancel()
		select {
		case <-child.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("child not ended at its parent's deadline")
		}
	})
}
