package transport

import (
	"bytes"
	"context"
	"log"
	"log/slog"
)

// memberlistLog turns memberlist's "[LEVEL] memberlist: text" lines into
// slog records, and feeds the one line that reveals suspicion to onSuspect:
// memberlist has no event for a node this node's probes suspect.
type memberlistLog struct {
	log       *slog.Logger
	onSuspect func(name string)
}

func newMemberlistLogger(l *slog.Logger, onSuspect func(string)) *log.Logger {
	return log.New(&memberlistLog{log: l, onSuspect: onSuspect}, "", 0)
}

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
	if w.log.Enabled(context.Background(), level) {
		w.log.Log(context.Background(), level, string(line))
	}
	return len(p), nil
}
