package homelock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// TestRepeatLockAllocatesNothing: the repeat lock and unlock reuse the
// key's shard's ended section; an allocation per lock would bring back the
// garbage that bounded the repeat path across cores.
func TestRepeatLockAllocatesNothing(t *testing.T) {
	n := readyNode(t)
	ctx := context.Background()
	h, err := n.Lock(ctx, "k")
	require.NoError(t, err)
	require.NoError(t, h.Unlock())
	allocs := testing.AllocsPerRun(1000, func() {
		h, err := n.Lock(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Unlock(); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs, "allocations per repeat lock+unlock")
	// The section is a malloc size class of its own when it is made.
	require.LessOrEqual(t, unsafe.Sizeof(section{}), uintptr(64))
}

// TestStaleHandleCopies: a Handle whose section ended and was reused for the
// next critical section on the key reads as unlocked, its Unlock does
// nothing to the new section, and its Key and Token stay its own.
func TestStaleHandleCopies(t *testing.T) {
	n := readyNode(t)
	ctx := context.Background()
	h1, err := n.Lock(ctx, "k")
	require.NoError(t, err)
	done1, ctx1 := h1.Done(), h1.Context()
	copy1 := h1
	require.NoError(t, h1.Unlock())
	<-done1
	<-ctx1.Done()

	h2, err := n.Lock(ctx, "k")
	require.NoError(t, err)
	require.Same(t, h1.s, h2.s, "the repeat lock reuses the ended section")
	require.True(t, h1.Token().Less(h2.Token()))

	for _, stale := range []Handle{h1, copy1} {
		require.ErrorIs(t, stale.Valid(), ErrLeaseExpired)
		require.Contains(t, stale.Valid().Error(), "unlocked")
		require.Zero(t, stale.Remaining())
		require.NoError(t, stale.Unlock())
		require.Equal(t, "k", stale.Key())
		require.Equal(t, copy1.Token(), stale.Token())
		<-stale.Done()
		<-stale.Context().Done()
	}
	// The stale unlocks left the new section alone.
	require.NoError(t, h2.Valid())
	require.Positive(t, h2.Remaining())
	select {
	case <-h2.Done():
		t.Fatal("a stale Handle's unlock ended the next section")
	default:
	}
	require.NoError(t, h2.Unlock())
	require.ErrorIs(t, h2.Valid(), ErrLeaseExpired)

	var zero Handle
	require.NoError(t, zero.Unlock())
	require.ErrorIs(t, zero.Valid(), ErrLeaseExpired)
	<-zero.Done()
}

// TestStaleHandleCopiesRace reads stale copies of Handles from other
// goroutines while the key's sections are reused under them: no copy ever
// reads as valid once its own section was unlocked, and (under -race, as CI
// runs it) the reads do not race with the reuse.
func TestStaleHandleCopiesRace(t *testing.T) {
	n := readyNode(t)
	ctx := context.Background()
	var stale atomic.Pointer[Handle]
	var wrong atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if p := stale.Load(); p != nil {
					h := *p
					if h.Valid() == nil || h.Remaining() != 0 {
						wrong.Add(1)
					}
					_ = h.Unlock()
					select {
					case <-h.Done():
					default:
						wrong.Add(1)
					}
				}
			}
		})
	}
	for i := 0; i < 20000; i++ {
		h, err := n.Lock(ctx, "k")
		require.NoError(t, err)
		if h.Valid() != nil {
			t.Fatalf("section %s invalid while held: %v", h.Token(), h.Valid())
		}
		if h.Valid() != nil {
			t.Fatalf("section %s ended under its holder: %v", h.Token(), h.Valid())
		}
		if err := h.Unlock(); err != nil && !errors.Is(err, ErrLeaseExpired) {
			t.Fatal(err)
		}
		ended := h
		stale.Store(&ended)
	}
	close(stop)
	wg.Wait()
	require.Zero(t, wrong.Load(), "stale copies that read as held")
}

// TestDoneClosesAcrossUnlock asks for Done and Context from another
// goroutine while the holder unlocks: whichever comes first, the channel and
// the context end (finish skips its mutex only when neither was asked for).
func TestDoneClosesAcrossUnlock(t *testing.T) {
	n := readyNode(t)
	ctx := context.Background()
	var open atomic.Int64
	var wg sync.WaitGroup
	for range 2000 {
		h, err := n.Lock(ctx, "k")
		require.NoError(t, err)
		wg.Go(func() {
			done, hctx := h.Done(), h.Context()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				open.Add(1)
			}
			select {
			case <-hctx.Done():
			case <-time.After(5 * time.Second):
				open.Add(1)
			}
		})
		require.NoError(t, h.Unlock())
	}
	wg.Wait()
	require.Zero(t, open.Load(), "Done channels or contexts left open after Unlock")
}

// TestEndedSectionHasNoLease: once unlocked, a Handle has no lease left
// even before its section is reused (the unlock stores no lease end; the
// state says it), and a reused section carries its new admission's lease
// end, whether it equals the last one (the store is skipped) or not. Long
// leases: a renewal between two locks moves the delegation's end on, which
// the checks allow, but a delegation near its end would clamp the short
// lease below to it.
func TestEndedSectionHasNoLease(t *testing.T) {
	c := newCluster(t, 1, longLeases)
	c.waitAvailable()
	n := c.nodes[0]
	ctx := context.Background()
	h1, err := n.Lock(ctx, "k")
	require.NoError(t, err)
	exp := h1.Expires()
	require.True(t, exp.After(n.clock.Now()), "a held section's lease end is ahead")
	require.NoError(t, h1.Unlock())
	require.True(t, h1.Expires().Before(n.clock.Now()), "an unlocked section still shows its lease end %v", h1.Expires())
	require.Zero(t, h1.Remaining())

	h2, err := n.Lock(ctx, "k")
	require.NoError(t, err)
	require.Same(t, h1.s, h2.s, "the repeat lock reuses the ended section")
	require.False(t, h2.Expires().Before(exp), "the next section under the delegation ends with it (%v), not at %v", exp, h2.Expires())
	require.True(t, h1.Expires().Before(n.clock.Now()))
	require.NoError(t, h2.Unlock())

	short := 100 * time.Millisecond
	h3, err := n.Lock(ctx, "k", WithLease(short))
	require.NoError(t, err)
	require.Same(t, h1.s, h3.s)
	require.True(t, h3.Expires().Before(exp), "a shorter lease's end %v, not the delegation's %v", h3.Expires(), exp)
	require.LessOrEqual(t, h3.Remaining(), short)
	require.NoError(t, h3.Unlock())

	h4, err := n.Lock(ctx, "k")
	require.NoError(t, err)
	require.Same(t, h1.s, h4.s)
	require.False(t, h4.Expires().Before(exp), "back to the delegation's end (%v) after a shorter lease, not %v", exp, h4.Expires())
	require.NoError(t, h4.Unlock())
}
