package localstore

import (
	"fmt"
	"log/slog"
)

// pebbleLogger routes Pebble's printf-style logging into the injected slog
// logger, so an embedding program configures one logger, not two. Pebble's
// informational lines (WAL recovery, compactions) are its internals, not the
// node's: they go to debug level.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug(fmt.Sprintf(format, args...), "subsystem", "pebble")
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "subsystem", "pebble")
}

// Fatalf must not return: Pebble calls it when it cannot keep its own
// invariants (its default logger exits the process). Panicking keeps that
// promise while leaving the message to the process's crash output.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	m := fmt.Sprintf(format, args...)
	p.l.Error(m, "subsystem", "pebble", "fatal", true)
	panic("localstore: pebble fatal error: " + m)
}
