package delegation

import "time"

// attemptLog remembers when each recent attempt of one request (or one
// delegation's renewals) was sent. Replies echo an attempt number and the
// holder anchors its lease at that send (H6, H22); attempts older than the
// window are no longer trusted and their replies are treated as late.
//
// The send times are kept only while an answer is outstanding (drop frees
// them): an idle delegation carries just the counter, which never restarts
// within one request or one delegation, so a delayed reply can never be
// taken for a later attempt's.
type attemptLog struct {
	last  uint32
	times *[attemptWindow]time.Time
}

const attemptWindow = 32

// next records a new attempt sent at now and returns its number (from 1).
func (l *attemptLog) next(now time.Time) uint32 {
	if l.times == nil {
		l.times = new([attemptWindow]time.Time)
	}
	l.last++
	l.times[l.last%attemptWindow] = now
	return l.last
}

// sentAt returns when attempt n was sent, if it is known.
func (l *attemptLog) sentAt(n uint32) (time.Time, bool) {
	if l.times == nil || n == 0 || n > l.last || l.last-n >= attemptWindow {
		return time.Time{}, false
	}
	t := l.times[n%attemptWindow]
	return t, !t.IsZero()
}

// drop forgets the send times, keeping the count.
func (l *attemptLog) drop() { l.times = nil }
