package delegation

import (
	"time"

	"github.com/homelock/homelock/internal/deadline"
)

// attemptLog remembers when each recent attempt of one request (or one
// delegation's renewals) was sent. Replies echo an attempt number and the
// holder anchors its lease at that send (H6, H22); attempts older than the
// window are no longer trusted and their replies are treated as late.
//
// The log keeps the send times only, and only while an answer is
// outstanding (the zero log has none); the count of attempts lives with
// what it counts, which outlives the times: an idle delegation keeps just
// its renewal count, which never restarts within one delegation (nor a
// request's within one request), so a delayed reply can never be taken for a
// later attempt's.
type attemptLog struct {
	times *[attemptWindow]deadline.Instant
}

const attemptWindow = 32

// record notes that attempt n was sent at now.
func (l *attemptLog) record(n uint32, now time.Time) {
	if l.times == nil {
		l.times = new([attemptWindow]deadline.Instant)
	}
	l.times[n%attemptWindow] = deadline.At(now)
}

// sentAt returns when attempt n was sent, if it is known; last is the
// latest attempt.
func (l attemptLog) sentAt(last, n uint32) (time.Time, bool) {
	if l.times == nil || n == 0 || n > last || last-n >= attemptWindow {
		return time.Time{}, false
	}
	t := l.times[n%attemptWindow]
	return t.Time(), !t.IsZero()
}
