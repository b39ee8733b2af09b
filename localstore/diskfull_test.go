package localstore

import (
	"bytes"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// A store reopened on a file system without room for its write-ahead log
// to become a table is refused at once (Pebble's Open would retry the flush
// forever), and opens as before once there is room.
func TestReopenOnFullDisk(t *testing.T) {
	fs := vfs.NewMem()
	s, err := Open(testDir, testOptions(fs))
	noErr(t, err)
	_, err = s.BumpIncarnation()
	noErr(t, err)
	noErr(t, s.Close())

	fs.TestingSetDiskUsage(vfs.DiskUsage{AvailBytes: openHeadroom, TotalBytes: 1 << 30})
	_, err = Open(testDir, testOptions(fs))
	isErr(t, err, ErrDiskFull)
	isErr(t, err, syscall.ENOSPC)
	errContains(t, err, testDir, "free space and start again")

	fs.TestingSetDiskUsage(vfs.DiskUsage{AvailBytes: 64 << 20, TotalBytes: 1 << 30})
	s, err = Open(testDir, testOptions(fs))
	noErr(t, err)
	inc, err := s.BumpIncarnation()
	noErr(t, err)
	if inc != 2 {
		t.Fatalf("incarnation %d after reopening, want 2", inc)
	}
	noErr(t, s.Close())
}

// Pebble's background errors are logged at most once per
// backgroundErrorEvery, each line counting those folded into it.
func TestBackgroundErrorsThrottled(t *testing.T) {
	var out bytes.Buffer
	now := time.Unix(1000, 0)
	b := &backgroundErrors{
		log: slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}})),
		now: func() time.Time { return now },
	}
	for _, step := range []struct {
		after time.Duration
		lines int
	}{
		{0, 1},                        // the first is logged at once
		{time.Millisecond, 1},         // folded
		{backgroundErrorEvery / 2, 1}, // folded
		{backgroundErrorEvery / 2, 2}, // due: logged with 2 folded
		{backgroundErrorEvery - 1, 2}, // folded
		{backgroundErrorEvery * 3, 3}, // logged with 1 folded
	} {
		now = now.Add(step.after)
		b.report(syscall.ENOSPC)
		if got := strings.Count(out.String(), "\n"); got != step.lines {
			t.Fatalf("after +%v: %d lines, want %d:\n%s", step.after, got, step.lines, out.String())
		}
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	for i, want := range []string{"repeats_folded=0", "repeats_folded=2", "repeats_folded=1"} {
		if !strings.Contains(lines[i], want) || !strings.Contains(lines[i], "no space left on device") {
			t.Fatalf("line %d %q lacks %q or the error", i, lines[i], want)
		}
	}
}
