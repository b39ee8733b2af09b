package transport

import (
	"context"
	"log/slog"
	"testing"
)

// levelRecorder keeps the level and message of every record logged.
type levelRecorder struct{ got []slog.Record }

func (r *levelRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *levelRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.got = append(r.got, rec)
	return nil
}
func (r *levelRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *levelRecorder) WithGroup(string) slog.Handler      { return r }

// TestMemberlistLogLevels: memberlist's level prefixes become slog levels,
// and a send that fails on a closed connection is an error while the
// membership runs but only debug once it is shutting down (memberlist's
// gossip goroutine outlives the sockets Shutdown closes).
func TestMemberlistLogLevels(t *testing.T) {
	const closedSend = "[ERR] memberlist: Failed to send gossip to 127.0.0.1:7967: write udp 127.0.0.1:7947->127.0.0.1:7967: use of closed network connection"
	for _, c := range []struct {
		line     string
		shutting bool
		level    slog.Level
		msg      string
	}{
		{"[DEBUG] memberlist: Stream connection from=127.0.0.1:1", false, slog.LevelDebug, "memberlist: Stream connection from=127.0.0.1:1"},
		{"[INFO] memberlist: Marking n2 as failed", false, slog.LevelInfo, "memberlist: Marking n2 as failed"},
		{"[WARN] memberlist: Was able to connect to n2 over TCP but UDP probes failed", false, slog.LevelWarn, "memberlist: Was able to connect to n2 over TCP but UDP probes failed"},
		{"[ERR] memberlist: Push/Pull with n2 failed: EOF", true, slog.LevelError, "memberlist: Push/Pull with n2 failed: EOF"},
		{"[ERROR] memberlist: something broke", false, slog.LevelError, "memberlist: something broke"},
		{"no prefix at all", false, slog.LevelInfo, "no prefix at all"},
		{closedSend, false, slog.LevelError, closedSend[len("[ERR] "):]},
		{closedSend, true, slog.LevelDebug, closedSend[len("[ERR] "):]},
	} {
		rec := &levelRecorder{}
		shutting := c.shutting
		l := newMemberlistLogger(slog.New(rec), func(string) {}, func() bool { return shutting })
		l.Print(c.line)
		if len(rec.got) != 1 || rec.got[0].Level != c.level || rec.got[0].Message != c.msg {
			t.Errorf("%q (shutting %v): logged %+v, want %v %q", c.line, c.shutting, rec.got, c.level, c.msg)
		}
	}
}
