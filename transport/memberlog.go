package transport

import (
	"bytes"
	"context"
	"log"
	"log/slog"
)

// memberlistLog turns memberlist's "[LEVEL] memberlist: text" lines into
// slog records, and feeds the one line that reveals suspicion to onSuspect:
// memberlist has no event for a node this node's probes suspect. Once
// shutting reports true, a failure on a closed connection is debug, not an
// error: memberlist's gossip goroutine can still send after Shutdown closed
// its sockets, and a clean stop should not log an ERROR.
type memberlistLog struct {
	log       *slog.Logger
	onSuspect func(name string)
	shutting  func() bool
}

func newMemberlistLogger(l *slog.Logger, onSuspect func(string), shutting func() bool) *log.Logger {
	return log.New(&memberlistLog{log: l, onSuspect: onSuspect, shutting: shutting}, "", 0)
}

// closedConn is how a send on a socket closed under it fails (net.ErrClosed).
const closedConn = "use of closed network connection"

var levels = []struct {
	prefix string
	level  slog.Level
}{
	{"[DEBUG] ", slog.LevelDebug},
	{"[INFO] ", slog.LevelInfo},
	{"[WARN] ", slog.LevelWarn},
	{"[ERR] ", slog.LevelError},
	{"[ERROR] ", slog.LevelError},
}

// suspectPrefix and suspectSuffix frame the node name in memberlist v0.7.0's
// probe failure line ("Suspect %s has failed, no acks received").
const (
	suspectPrefix = "memberlist: Suspect "
	suspectSuffix = " has failed, no acks received"
)

func (w *memberlistLog) Write(p []byte) (int, error) {
	line := bytes.TrimRight(p, "\n")
	level := slog.LevelInfo
	for _, l := range levels {
		if bytes.HasPrefix(line, []byte(l.prefix)) {
			level, line = l.level, line[len(l.prefix):]
			break
		}
	}
	if bytes.HasPrefix(line, []byte(suspectPrefix)) && bytes.HasSuffix(line, []byte(suspectSuffix)) {
		w.onSuspect(string(line[len(suspectPrefix) : len(line)-len(suspectSuffix)]))
	}
	if level > slog.LevelDebug && bytes.Contains(line, []byte(closedConn)) && w.shutting() {
		level = slog.LevelDebug
	}
	if w.log.Enabled(context.Background(), level) {
		w.log.Log(context.Background(), level, string(line))
	}
	return len(p), nil
}
