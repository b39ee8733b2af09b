package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc/status"

	"github.com/homelock/homelock/clientapi"
)

const defaultAPIAddr = "127.0.0.1:7950"

func runLock(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lock", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: homelock lock NAME [flags] -- COMMAND [ARGS...]

Holds the cluster lock NAME while COMMAND runs, like flock(1) and
"etcdctl lock". The fencing token is in the environment as HOMELOCK_TOKEN
(and the key as HOMELOCK_KEY). If the lease is lost, COMMAND gets SIGTERM
and, after --kill-after, SIGKILL. The lease is also kept on this process's
own clock, so a node that goes silent (paused, cut off) cannot leave COMMAND
running past it. Exits with COMMAND's status; 1 if the lock could not be
taken or was lost (2 for usage errors).

`+apiClientHelp+`
Flags:
`)
		fs.PrintDefaults()
	}
	var api apiClientFlags
	api.register(fs)
	node := &api.node
	leaseFlag := fs.Duration("lease", 0, "bound the critical section (0: renewed while the command runs)")
	wait := fs.Duration("wait", 0, "give up after waiting this long (0: the node's default)")
	try := fs.Bool("try", false, "fail at once if the lock is held")
	killAfter := fs.Duration("kill-after", 5*time.Second, "SIGKILL this long after SIGTERM")
	// NAME comes first, flags after it: parse NAME by hand.
	if len(args) == 0 || args[0] == "" || args[0][0] == '-' {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
			fs.Usage()
			return 0
		}
		fs.Usage()
		return 2
	}
	name := args[0]
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	cmdArgs := fs.Args()
	if len(cmdArgs) == 0 {
		fmt.Fprintln(stderr, "homelock lock: no command given (put it after --)")
		return 2
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := api.dial(dctx)
	dcancel()
	if err != nil {
		fmt.Fprintf(stderr, "homelock lock: %v\n", err)
		return 1
	}
	defer conn.Close()
	stream, err := clientapi.NewClientClient(conn).Lock(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "homelock lock: %s: %v\n", *node, err)
		return 1
	}
	req := &clientapi.LockRequest{Key: name, LeaseNanos: int64(*leaseFlag), WaitNanos: int64(*wait), Try: *try}
	lease := newClientLease()
	if err := stream.Send(req); err != nil {
		fmt.Fprintf(stderr, "homelock lock: %s: %v\n", *node, err)
		return 1
	}
	ev, err := stream.Recv()
	if err != nil || ev.GetKind() != clientapi.LockEvent_KIND_ACQUIRED {
		fmt.Fprintf(stderr, "homelock lock: %s: %s\n", name, describe(err, ev))
		return 1
	}
	token := ev.GetToken()
	// ACQUIRED's validity only paces the pings: counted from the request it
	// may be nearly spent after a long wait, so the lease starts with the
	// first ping's answer, below.
	validFor := time.Duration(ev.GetValidForNanos())

	// One goroutine reads the node's events, one pings for validity; sends
	// (pings, and the CloseSend that unlocks) share a mutex, as a stream
	// allows one sender at a time.
	lost := make(chan string, 1)
	firstValid := make(chan struct{})
	go func() {
		var once sync.Once
		for {
			ev, err := stream.Recv()
			if err == nil && ev.GetKind() == clientapi.LockEvent_KIND_VALID {
				lease.answered(ev.GetPing(), time.Duration(ev.GetValidForNanos()))
				once.Do(func() { close(firstValid) })
				continue
			}
			lost <- describe(err, ev)
			return
		}
	}()
	var sendMu sync.Mutex
	ping := func() error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return stream.Send(&clientapi.LockRequest{Ping: lease.ping(time.Now())})
	}
	// One ping, counted from now, gives the command its lease before it
	// starts (nothing runs meanwhile, so waiting for the answer is safe).
	if err := ping(); err != nil {
		fmt.Fprintf(stderr, "homelock lock: %s: %v\n", name, err)
		return 1
	}
	confirm := time.NewTimer(max(validFor, time.Second))
	select {
	case <-firstValid:
		confirm.Stop()
	case why := <-lost:
		fmt.Fprintf(stderr, "homelock lock: %s: lock lost before the command started (%s)\n", name, why)
		return 1
	case <-confirm.C:
		fmt.Fprintf(stderr, "homelock lock: %s: lock lost before the command started (no word from the node)\n", name)
		return 1
	}
	ranOut := make(chan string, 1)
	go watchLease(ctx, lease, ranOut)

	// The command's output and ours interleave on one writer: serialise them
	// (and hide a bytes.Buffer's ReadFrom, which a concurrent Write races).
	stdout, stderr = &syncWriter{w: stdout}, &syncWriter{w: stderr}
	cmd := exec.Command(cmdArgs[0], cmdArgs[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	cmd.Env = append(os.Environ(), "HOMELOCK_TOKEN="+token, "HOMELOCK_KEY="+name)
	// A grandchild that outlives a killed command may hold its output open:
	// Wait returns this long after the command itself exited regardless.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "homelock lock: %v\n", err)
		return 127
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopPings := make(chan struct{})
	pinged := make(chan struct{})
	go func() {
		defer close(pinged)
		t := time.NewTicker(pingEvery(validFor))
		defer t.Stop()
		for {
			select {
			case <-stopPings:
				return
			case <-t.C:
			}
			if ping() != nil {
				return // the stream ended: the reader reports why
			}
		}
	}()
	unlock := func() {
		close(stopPings)
		<-pinged
		sendMu.Lock()
		_ = stream.CloseSend()
		sendMu.Unlock()
	}
	var waitErr error
	var why string
	select {
	case waitErr = <-exited:
		unlock()
		select {
		case <-lost: // RELEASED, or the stream ended
		case <-time.After(5 * time.Second):
		}
		return exitCode(waitErr)
	case why = <-lost:
	case why = <-ranOut:
	}
	fmt.Fprintf(stderr, "homelock lock: %s: lock lost (%s); stopping the command\n", name, why)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case waitErr = <-exited:
	case <-time.After(*killAfter):
		_ = cmd.Process.Kill()
		waitErr = <-exited
	}
	if waitErr == nil {
		// The command finished as the lease ran out: its work may not
		// have counted. Say so in the status.
		return 1
	}
	return exitCode(waitErr)
}

// watchLease reports on ranOut once the lease's deadline passes on this
// process's clock without the node having extended it (ctx ends it).
func watchLease(ctx context.Context, lease *clientLease, ranOut chan<- string) {
	t := time.NewTimer(time.Until(lease.until()))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if left := time.Until(lease.until()); left > 0 {
			t.Reset(left)
			continue
		}
		ranOut <- "its lease ran out on this client's clock with no word from the node"
		return
	}
}

// describe says why a Lock stream ended or what it sent.
func describe(err error, ev *clientapi.LockEvent) string {
	switch {
	case err != nil && errors.Is(err, io.EOF):
		return "the node ended the stream"
	case err != nil:
		if s, ok := status.FromError(err); ok {
			return fmt.Sprintf("%s (%s)", s.Message(), s.Code())
		}
		return err.Error()
	case ev.GetKind() == clientapi.LockEvent_KIND_LOST:
		return "lost: " + ev.GetDetail()
	}
	return ev.GetKind().String()
}

// exitCode is the command's exit status as a shell reports it: its code, or
// 128 + the signal that killed it.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return 1
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
