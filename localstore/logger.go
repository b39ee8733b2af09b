package localstore

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// pebbleLogger routes Pebble's printf-style logging into the injected slog
// logger, so an embedding program configures one logger, not two. Pebble's
// informational lines (WAL recovery, compactions) are its internals, not the
// node's: they go to debug level.
type pebbleLogger struct {
	l *slog.Logger
	// opening is set while openPebble runs: a Fatalf then panics, and
	// openPebble returns the panic as an error. Nil or unset, a Fatalf
	// crashes the process.
	opening *atomic.Bool
}

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug(fmt.Sprintf(format, args...), "subsystem", "pebble")
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "subsystem", "pebble")
}

// Fatalf must not return: Pebble calls it when it cannot keep its own
// invariants, as when a log write or sync fails (its default logger exits the
// process). Outside Open it crashes the process with the message as an
// unrecovered panic raised on a goroutine of its own, and blocks until the
// process is gone. A panic raised where Pebble called, on a node's step or a
// peer's stream, would unwind through their deferred unlocks and cleanups
// while they hold locks the cleanups want: one such unwind once hung a node
// whose disk was full, alive in gossip but answering nobody, its keys
// unavailable until someone killed it. A crash instead takes the node out,
// and the cluster rehomes its keys.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	f := pebbleFatal{msg: fmt.Sprintf(format, args...)}
	for _, a := range args {
		if err, ok := a.(error); ok {
			f.cause = err
			break
		}
	}
	p.l.Error(f.msg, "subsystem", "pebble", "fatal", true)
	if p.opening != nil && p.opening.Load() {
		panic(f)
	}
	go func() { panic(f) }()
	select {}
}

// pebbleFatal is the panic value of Pebble's Fatalf: its message and the
// first error among its arguments (a full disk's ENOSPC, say), which it
// wraps.
type pebbleFatal struct {
	msg   string
	cause error
}

func (f pebbleFatal) Error() string { return "pebble fatal error: " + f.msg }
func (f pebbleFatal) Unwrap() error { return f.cause }

// backgroundErrors logs Pebble's background errors (a failed flush or
// compaction) at most once per backgroundErrorEvery, each line with the count
// of errors folded into it since the last. Pebble retries a failed flush at
// once and without end: on a full disk it failed some 6,000 times a second,
// and a line each filled 700 MB of log in ten minutes, on a disk that may be
// the full one.
type backgroundErrors struct {
	log *slog.Logger
	now func() time.Time

	mu     sync.Mutex
	last   time.Time // of the last line logged; zero before the first
	folded int
}

const backgroundErrorEvery = 10 * time.Second

func (b *backgroundErrors) report(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if !b.last.IsZero() && now.Sub(b.last) < backgroundErrorEvery {
		b.folded++
		return
	}
	b.log.Error("pebble background error", "subsystem", "pebble", "err", err, "repeats_folded", b.folded)
	b.last, b.folded = now, 0
}
