package main

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSignalRelayPairsInterrupts: on a terminal, a SIGINT that both the
// lock command and its supervisor got is a Ctrl-C (fromTerminal, not
// passed on to COMMAND); one that only one of them got is a kill -INT of
// that process, passed on as a SIGINT once the pairing window has passed.
func TestSignalRelayPairsInterrupts(t *testing.T) {
	const (
		own      = "own SIGINT"
		sup      = "supervisor's SIGINT"
		term     = "own SIGTERM"
		orphan   = "parentGone"
		supGone  = "supervisor's pipe closed"
		long     = time.Hour
		short    = 20 * time.Millisecond
		ctrlC    = "Ctrl-C"
		interrup = "SIGINT"
		sigterm  = "SIGTERM"
	)
	for _, tc := range []struct {
		name      string
		window    time.Duration
		notTTY    bool // stdin is not the foreground group's terminal
		noPipe    bool // no supervisor, or one that cannot say
		in        []string
		want      []string
		wantQuiet bool // and nothing else comes within a moment
	}{
		{name: "Ctrl-C, own first", window: long, in: []string{own, sup}, want: []string{ctrlC}, wantQuiet: true},
		{name: "Ctrl-C, the supervisor's first", window: long, in: []string{sup, own}, want: []string{ctrlC}, wantQuiet: true},
		{name: "two Ctrl-Cs", window: long, in: []string{own, sup, sup, own}, want: []string{ctrlC, ctrlC}, wantQuiet: true},
		{name: "kill -INT of the supervisor", window: short, in: []string{sup}, want: []string{interrup}},
		{name: "kill -INT of the lock command", window: short, in: []string{own}, want: []string{interrup}},
		{name: "two kills of the lock command: the first has no pair", window: long, in: []string{own, own}, want: []string{interrup}, wantQuiet: true},
		{name: "a kill, then a Ctrl-C", window: long, in: []string{own, own, sup}, want: []string{interrup, ctrlC}, wantQuiet: true},
		{name: "not the terminal's foreground group", window: long, notTTY: true, in: []string{own}, want: []string{interrup}, wantQuiet: true},
		{name: "SIGTERM at once", window: long, in: []string{term}, want: []string{sigterm}, wantQuiet: true},
		{name: "no word from a supervisor: the terminal's", window: long, noPipe: true, in: []string{own}, want: []string{ctrlC}, wantQuiet: true},
		{name: "the supervisor gone with a SIGINT waiting", window: long, in: []string{own, supGone}, want: []string{ctrlC}, wantQuiet: true},
		{name: "the supervisor gone: later SIGINTs the terminal's", window: long, in: []string{supGone, own}, want: []string{ctrlC}, wantQuiet: true},
		{name: "a parentGone while the supervisor lives is dropped", window: long, in: []string{orphan, term}, want: []string{sigterm}, wantQuiet: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, interrupts := make(chan os.Signal), make(chan struct{})
			sigs, done, ran := make(chan os.Signal, 8), make(chan struct{}), make(chan struct{})
			r := signalRelay{
				raw: raw, interrupts: interrupts, sigs: sigs, done: done, window: tc.window,
				terminal: func() bool { return !tc.notTTY },
				orphaned: func() bool { return false },
			}
			if tc.noPipe {
				r.interrupts = nil
			}
			go func() {
				defer close(ran)
				r.run()
			}()
			defer func() {
				close(done)
				<-ran
			}()
			for _, in := range tc.in {
				switch in {
				case own:
					raw <- syscall.SIGINT
				case term:
					raw <- syscall.SIGTERM
				case orphan:
					raw <- parentGone
				case sup:
					interrupts <- struct{}{}
				case supGone:
					close(interrupts)
				}
			}
			var got []string
			for range tc.want {
				select {
				case s := <-sigs:
					got = append(got, signalName(s))
				case <-time.After(5 * time.Second):
					t.Fatalf("got %q, then nothing for 5s; want %q", got, tc.want)
				}
			}
			require.Equal(t, tc.want, got)
			if tc.wantQuiet {
				select {
				case s := <-sigs:
					t.Fatalf("got %q, then %s; want only %q", got, signalName(s), tc.want)
				case <-time.After(50 * time.Millisecond):
				}
			}
		})
	}
}

func signalName(s os.Signal) string {
	switch s {
	case fromTerminal{syscall.SIGINT}:
		return "Ctrl-C"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}

// TestSignalNumber: a Ctrl-C before COMMAND starts ends the wait with
// 128+SIGINT, as a SIGINT does.
func TestSignalNumber(t *testing.T) {
	require.Equal(t, 2, signalNumber(syscall.SIGINT))
	require.Equal(t, 2, signalNumber(fromTerminal{syscall.SIGINT}))
	require.Equal(t, 15, signalNumber(syscall.SIGTERM))
}
