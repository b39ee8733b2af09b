package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/homelock/homelock"
	"github.com/homelock/homelock/clientapi"
	"github.com/homelock/homelock/delegation"
)

const defaultAPIAddr = "127.0.0.1:7950"

var (
	// minLease is the shortest --lease worth asking for: the protocol's
	// MinUseful, below which a grant is not used at all.
	minLease = homelock.DefaultConfig().MinUseful
	// defaultWait is --wait's default, the library's DefaultWait: the lock
	// command always sends its wait, as it enforces it on its own clock too.
	defaultWait = homelock.DefaultConfig().DefaultWait
	// answerMargin is how long past --wait the lock command waits for the
	// node's own answer. The node times the wait out itself within a
	// RetryInterval, so a node that has said nothing by then is not
	// answering (paused, cut off, or not a homelock node at all).
	answerMargin = 2 * homelock.DefaultConfig().RetryInterval
)

const defaultKillAfter = 5 * time.Second

// connectBound is how long a node that is not the last --node listed has
// to answer a health check before the next is tried.
const connectBound = 2 * time.Second

// homeSilence is how long a node that is not the last --node listed waits
// for a key's home that answers it nothing before it gives way to the next
// (homelock.WithHomeSilence): a second (ten retries at the default
// RetryInterval), or half of what is left of --wait, so that the next node
// has the other half.
func homeSilence(wait time.Duration) time.Duration { return min(time.Second, wait/2) }

// forwarded are the signals `homelock lock` passes on to its command, as
// timeout(1), systemd and a terminal send them, so that the command ends
// (and only then the lock) rather than the lock under a running command.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

const lockUsage = `Usage: homelock lock [flags] NAME [flags] -- COMMAND [ARGS...]

Holds the cluster lock NAME while COMMAND runs, like flock(1) and
"etcdctl lock". COMMAND starts once the lock is held, with the fencing token
in HOMELOCK_TOKEN (and the key in HOMELOCK_KEY); the lock is released only
after COMMAND has exited, and (on Linux) every process it started too:

  - SIGINT, SIGTERM and SIGHUP are passed on to COMMAND (once it has
    exited, to the processes it left running), and the lock is held until
    they exit (SIGKILL after --kill-after). Before COMMAND starts they end
    the wait, and nothing runs. A Ctrl-C on the terminal (stdin) is not
    passed on: the terminal sends it to COMMAND itself (a kill -INT of
    homelock lock's PID is, a second later).
  - If the lease is lost (revoked, or run out on this process's own clock
    because the node went silent), COMMAND and every process it started get
    SIGTERM, and SIGKILL after --kill-after. A lease that ran out while this
    process did not run (Ctrl-Z then fg, a suspend) is put to the node
    first: if it says the lock is still held, COMMAND goes on.
  - If the node shuts down (SIGTERM to homelock node), they get SIGTERM the
    same way, and the node keeps the lock until they have exited: for
    --kill-after plus 2s, which this command tells it (at least 10s, at most
    10min).
  - If homelock lock is killed outright (SIGKILL), COMMAND and every process
    it started are SIGKILLed, and the lock is held until they have exited
    (Linux: the process you start supervises the lock command below it,
    which learns of its death from the kernel; if that lock command is the
    one killed, its lock ends at once and the supervisor kills them).
  - With --release-at-exit the lock is released when COMMAND exits, and
    what it left running (a daemon it started) runs on without it, as with
    flock -o. While COMMAND runs, they are under the lock all the same.

--wait is kept on this process's clock too: a node that does not answer
(paused, cut off, a port that never speaks) ends it within about --wait.
--node may list several nodes of one cluster, comma-separated: one that
cannot grant the lock itself (unreachable, cut off from its cluster,
shutting down, or cut off from the key's home alone, which has then
answered it nothing for a second) gives way to the next, within the same
--wait. A node that answers that it cannot serve yet (in its restart gate,
joining, no epoch liveness, a mixed cluster during a roll, shutting down)
is asked again, with the others, until --wait runs out: a lock through the
node a rolling restart just started waits for it instead of failing. A
node that does not answer at all is not waited for: with no other node
left, the lock command exits 121 at once.

` + apiClientHelp + `
Flags:
`

// lockArgs is a parsed `homelock lock` command line.
type lockArgs struct {
	api         apiClientFlags
	name        string
	lease, wait time.Duration
	killAfter   time.Duration
	try         bool
	// releaseAtExit: the lock ends with COMMAND, not with the last process
	// it started (flock -o's choice, for a COMMAND that starts a daemon).
	releaseAtExit bool
	// waitSet: --wait was given. --try without it leaves the node's own,
	// short, wait for the home's answer.
	waitSet bool
	// nodes are --node's addresses, in the order they are tried.
	nodes   []string
	command []string
}

// usageError is a command line that parsed but makes no sense; the flag
// package's own errors have been printed by the time parseLockArgs returns
// them, these have not.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// parseLockArgs reads `homelock lock`'s arguments. Flags may come before or
// after NAME. Everything after the first "--" is COMMAND; without "--",
// COMMAND starts at the first argument after NAME that is not a flag.
func parseLockArgs(args []string, out io.Writer) (lockArgs, error) {
	var a lockArgs
	fs := flag.NewFlagSet("lock", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprint(out, lockUsage)
		fs.PrintDefaults()
		fmt.Fprint(out, "\n"+exitCodesHelp)
	}
	a.api.register(fs)
	fs.DurationVar(&a.lease, "lease", 0, fmt.Sprintf("bound the critical section to this long, at least %v (0: held while COMMAND runs)", minLease))
	fs.DurationVar(&a.wait, "wait", defaultWait, "give up if the lock is not held within this long")
	fs.BoolVar(&a.try, "try", false, "fail at once if the lock is held (waiting only for the home's answer, or up to --wait if given)")
	fs.DurationVar(&a.killAfter, "kill-after", defaultKillAfter, "SIGKILL COMMAND this long after passing it a signal or SIGTERM")
	fs.BoolVar(&a.releaseAtExit, "release-at-exit", false, "release the lock when COMMAND exits, leaving what it started running without it (like flock -o: for a COMMAND that starts a daemon)")

	before, command := args, []string(nil)
	dash := false
	for i, arg := range args {
		if arg == "--" {
			before, command, dash = args[:i], args[i+1:], true
			break
		}
	}
	var names []string
	for rest := before; ; {
		if err := fs.Parse(rest); err != nil {
			return a, err
		}
		if fs.NArg() == 0 {
			break
		}
		if !dash && len(names) == 1 {
			command = fs.Args()
			break
		}
		names = append(names, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	switch {
	case len(names) == 0:
		return a, usagef("no lock NAME given")
	case names[0] == "":
		return a, usagef("empty lock NAME")
	case len(names) > 1:
		return a, usagef("unexpected argument %q before -- (COMMAND goes after --)", names[1])
	case len(command) == 0:
		return a, usagef("no COMMAND given (put it after --)")
	}
	a.name, a.command = names[0], command
	fs.Visit(func(f *flag.Flag) { a.waitSet = a.waitSet || f.Name == "wait" })
	switch {
	case a.lease < 0:
		return a, usagef("--lease (%v) must not be negative (0: held while COMMAND runs)", a.lease)
	case a.lease > 0 && a.lease < minLease:
		return a, usagef("--lease (%v) is below the shortest lease the protocol uses (%v)", a.lease, minLease)
	case a.wait <= 0:
		return a, usagef("--wait (%v) must be positive (--try does not queue)", a.wait)
	case a.killAfter < 0:
		return a, usagef("--kill-after (%v) must not be negative", a.killAfter)
	}
	nodes, err := a.api.nodes()
	if err != nil {
		return a, usagef("%v", err)
	}
	a.nodes = nodes
	return a, nil
}

func runLock(args []string, stdout, stderr io.Writer) int {
	return lockMain(args, stdout, stderr, 0, nil)
}

// parentGone is the signal the kernel sends a lock command when its
// supervisor dies (supervise_linux.go): the lock command was killed
// outright, and what COMMAND started must not outlive its lock.
const parentGone = syscall.SIGUSR2

// lockMain is the lock command; supervisor is the PID of the process that
// started it as its supervisor (0: none), and interrupts says when that
// supervisor got a SIGINT while it shared a terminal's foreground group
// with this process (nil: it cannot say).
func lockMain(args []string, stdout, stderr io.Writer, supervisor int, interrupts <-chan struct{}) int {
	a, err := parseLockArgs(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "homelock lock: %v\nRun \"homelock lock --help\" for usage.\n", ue)
		return exitUsage
	}
	if err != nil {
		return exitUsage // the flag package printed it
	}
	// From here the signals are this process's to handle: they end the
	// wait before COMMAND starts, and go to COMMAND once it runs.
	sigs := make(chan os.Signal, len(forwarded)+1)
	stop := relaySignals(sigs, supervisor, interrupts)
	defer stop()

	// --wait bounds the whole acquisition, whichever nodes it takes, and
	// however many times it asks them.
	deadline := time.Now().Add(a.wait)
	// said is what each node last refused with, as printed (without its
	// numbers: "restart gate: 4.2s left" once, not once a round).
	said := make(map[string]string)
	backoff := firstAskAgain
	for {
		again := false // a node that answered cannot serve yet: ask again
		for i := range a.nodes {
			a.api.node = a.nodes[i]
			last := i == len(a.nodes)-1
			conn, err := a.api.client()
			if err != nil {
				fmt.Fprintf(stderr, "homelock lock: %v\n", err)
				return exitUsage
			}
			h, lerr := acquire(context.Background(), conn, a, time.Until(deadline), !last, sigs)
			if lerr == nil {
				defer conn.Close()
				defer h.cancel()
				return hold(a, h, sigs, stdout, stderr)
			}
			conn.Close()
			// Any node grants any key, so a node that cannot is passed over;
			// one that had the lock queued until --wait ran out, or refused the
			// request, has said what the next would. A node that answered
			// that it cannot serve yet (its restart gate, a join, no epoch
			// liveness, a mixed cluster during a roll, shutting down) is
			// asked again while --wait lasts; one that did not answer is
			// not waited for.
			again = again || (lerr.tryNext && lerr.code == exitNoLocks && !a.try)
			if !lerr.tryNext || time.Until(deadline) < minLease || (last && !again) {
				fmt.Fprintf(stderr, "homelock lock: %s: %s\n", a.name, lerr.msg)
				return lerr.code
			}
			if said[a.api.node] != withoutDigits(lerr.msg) {
				said[a.api.node] = withoutDigits(lerr.msg)
				next := "asking again within --wait"
				if !last {
					next = "trying " + a.nodes[i+1]
				}
				fmt.Fprintf(stderr, "homelock lock: %s: %s; %s\n", a.name, lerr.msg, next)
			}
		}
		pause := min(backoff, time.Until(deadline)-minLease)
		backoff = min(2*backoff, maxAskAgain)
		if lerr := waitToAskAgain(pause, sigs); lerr != nil {
			fmt.Fprintf(stderr, "homelock lock: %s: %s\n", a.name, lerr.msg)
			return lerr.code
		}
	}
}

const (
	// firstAskAgain and maxAskAgain pace the rounds of asking nodes that
	// cannot serve yet: doubling from the first to the most.
	firstAskAgain = 100 * time.Millisecond
	maxAskAgain   = time.Second
)

// withoutDigits is msg with its digits dropped.
func withoutDigits(msg string) string {
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return -1
		}
		return r
	}, msg)
}

// waitToAskAgain sleeps d before the next round of nodes, unless a signal
// ends the wait first (COMMAND has not run).
func waitToAskAgain(d time.Duration, sigs <-chan os.Signal) *lockError {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case got := <-sigs:
		return waitEnded(got)
	}
}

// waitEnded is the refusal for a signal that ended the wait for the lock.
func waitEnded(got os.Signal) *lockError {
	if got == parentGone {
		return &lockError{code: 128 + int(parentGone), msg: "killed (its supervisor is gone) while waiting for the lock; COMMAND did not run"}
	}
	return &lockError{code: 128 + signalNumber(got), msg: fmt.Sprintf("got %v while waiting for the lock; COMMAND did not run", got)}
}

// fromTerminal is a signal a terminal sent to its whole foreground process
// group, COMMAND's processes included: a Ctrl-C. It ends the wait for the
// lock, but is not passed on to COMMAND, which got it too.
type fromTerminal struct{ sig syscall.Signal }

func (f fromTerminal) String() string { return f.sig.String() }

// Signal implements os.Signal.
func (fromTerminal) Signal() {}

// signalNumber is s's number, for an exit status of 128+N.
func signalNumber(s os.Signal) int {
	switch s := s.(type) {
	case syscall.Signal:
		return int(s)
	case fromTerminal:
		return int(s.sig)
	}
	return 0
}

// pairWindow is how long a SIGINT that one of the supervisor and the lock
// command got waits for the other's before it counts as a kill -INT of that
// process alone: a terminal interrupts every process of the group in one
// pass, so the two arrive within microseconds on an idle machine.
const pairWindow = time.Second

// relaySignals passes the forwarded signals on to sigs until stop, and,
// with a supervisor, parentGone once the supervisor has died (the kernel's;
// a parentGone from anyone else while the supervisor lives is dropped). If
// the supervisor died before this process could listen, parentGone is there
// at once.
//
// A SIGINT while stdin is a terminal whose foreground group is this
// process's comes through as fromTerminal when the terminal sent it. With
// a supervisor that says so (interrupts), that is when both processes got
// one within pairWindow; one that only one of them got, a kill -INT of its
// PID, comes through as a SIGINT once the window has passed, to be passed
// on to COMMAND. Without (no supervisor, or it is gone), every SIGINT there
// counts as the terminal's (signal.Notify does not say who sent a signal).
func relaySignals(sigs chan<- os.Signal, supervisor int, interrupts <-chan struct{}) (stop func()) {
	raw := make(chan os.Signal, cap(sigs))
	watched := slices.Clone(forwarded)
	if supervisor != 0 {
		watched = append(watched, parentGone)
	}
	signal.Notify(raw, watched...)
	if supervisor != 0 && os.Getppid() != supervisor {
		raw <- parentGone
	}
	done, relayed := make(chan struct{}), make(chan struct{})
	r := signalRelay{
		raw: raw, interrupts: interrupts, sigs: sigs, done: done,
		terminal: terminalForeground, window: pairWindow,
		orphaned: func() bool { return supervisor != 0 && os.Getppid() != supervisor },
	}
	go func() {
		defer close(relayed)
		r.run()
	}()
	return func() {
		signal.Stop(raw)
		close(done)
		<-relayed
	}
}

// signalRelay is relaySignals's loop, apart from the process for its tests.
type signalRelay struct {
	raw        <-chan os.Signal
	interrupts <-chan struct{} // nil: the supervisor cannot say
	sigs       chan<- os.Signal
	done       <-chan struct{}
	terminal   func() bool // terminalForeground
	orphaned   func() bool // the supervisor is gone
	window     time.Duration
}

// A SIGINT waiting for its pair: this process's own, or the supervisor's.
const (
	noInterrupt = iota
	ownInterrupt
	supervisorInterrupt
)

func (r *signalRelay) run() {
	pending := noInterrupt
	var expire <-chan time.Time
	var timer *time.Timer
	wait := func(from int) {
		pending = from
		if timer == nil {
			timer = time.NewTimer(r.window)
		} else {
			timer.Reset(r.window)
		}
		expire = timer.C
	}
	// A SIGINT from one process: the pair of the other's, or the first
	// of a pair; a second from the same one means the first had none.
	interrupted := func(from int) {
		switch pending {
		case noInterrupt:
			wait(from)
		case from:
			r.pass(syscall.SIGINT)
			wait(from)
		default:
			pending, expire = noInterrupt, nil
			timer.Stop()
			r.pass(fromTerminal{syscall.SIGINT})
		}
	}
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		select {
		case <-r.done:
			return
		case s := <-r.raw:
			switch {
			case s == parentGone && !r.orphaned():
			case s != syscall.SIGINT || !r.terminal():
				r.pass(s)
			case r.interrupts == nil:
				r.pass(fromTerminal{syscall.SIGINT})
			default:
				interrupted(ownInterrupt)
			}
		case _, ok := <-r.interrupts:
			if !ok {
				// The supervisor is gone (parentGone follows) or cannot
				// say: a SIGINT waiting for its pair is the terminal's.
				r.interrupts = nil
				if pending != noInterrupt {
					pending, expire = noInterrupt, nil
					r.pass(fromTerminal{syscall.SIGINT})
				}
				continue
			}
			interrupted(supervisorInterrupt)
		case <-expire:
			pending, expire = noInterrupt, nil
			r.pass(syscall.SIGINT)
		}
	}
}

// pass hands s on, dropping it if sigs has no room, as signal.Notify does.
func (r *signalRelay) pass(s os.Signal) {
	select {
	case r.sigs <- s:
	default:
	}
}

// held is a lock the node granted: its stream (cancel ends it, and the
// node then unlocks), its token, and the validity ACQUIRED reported.
type held struct {
	stream   clientapi.Client_LockClient
	cancel   context.CancelFunc
	token    string
	validFor time.Duration
}

// lockError is why the lock was not taken or kept, with the exit status
// that says so.
type lockError struct {
	code int
	msg  string
	// tryNext: the refusal is the node's own (no connection, cut off from
	// its cluster, not a member, shutting down, full), so another node may
	// grant the lock.
	tryNext bool
}

// acquire opens the Lock stream and waits for ACQUIRED, for at most wait
// (what is left of --wait) plus answerMargin on this process's clock, or
// until a signal. With another node to try next, the node must first
// answer a health check within connectBound (a paused node accepts the
// connection and never answers), and it gives way to the next once the
// key's home has answered it nothing for homeSilence (a home cut off from
// this node alone, in a partial partition, may answer the next).
func acquire(ctx context.Context, conn *grpc.ClientConn, a lockArgs, wait time.Duration, next bool, sigs <-chan os.Signal) (*held, *lockError) {
	var probe, silence time.Duration
	if next {
		probe, silence = connectBound, homeSilence(wait)
	}
	sctx, cancel := context.WithCancel(ctx)
	// One watcher ends the stream at the deadline or on a signal; it has
	// stopped (and said which, if either) before acquire returns.
	var (
		silent bool
		got    os.Signal
	)
	stop, watched := make(chan struct{}), make(chan struct{})
	timer := time.NewTimer(wait + answerMargin)
	go func() {
		defer close(watched)
		defer timer.Stop()
		select {
		case <-timer.C:
			silent = true
			cancel()
		case got = <-sigs:
			cancel()
		case <-stop:
		}
	}()
	var (
		probeErr error
		ev       *clientapi.LockEvent
		stream   clientapi.Client_LockClient
		err      error
	)
	if probe > 0 {
		pctx, pcancel := context.WithTimeout(sctx, min(probe, wait))
		probeErr = waitReady(pctx, conn)
		pcancel()
		if errors.Is(probeErr, context.DeadlineExceeded) {
			probeErr = fmt.Errorf("no answer within %v: paused, cut off, or not a homelock node", probe)
		}
	}
	if probeErr == nil {
		ev, stream, err = openLock(sctx, conn, a, wait, silence)
	}
	close(stop)
	<-watched
	fail := func(e *lockError) (*held, *lockError) {
		cancel()
		return nil, e
	}
	switch {
	case got != nil:
		return fail(waitEnded(got))
	case silent:
		return fail(&lockError{code: exitNoNode, msg: fmt.Sprintf("node %s did not answer within --wait %v (+%v): paused, cut off, or not a homelock node",
			a.api.node, a.wait, answerMargin)})
	case probeErr != nil:
		return fail(&lockError{code: exitNoNode, msg: fmt.Sprintf("node %s: %v%s", a.api.node, probeErr, a.api.hint(probeErr)), tryNext: true})
	case err != nil:
		return fail(refusal(a, err))
	case ev.GetKind() != clientapi.LockEvent_KIND_ACQUIRED:
		return fail(&lockError{code: exitFailed, msg: fmt.Sprintf("node %s answered %s, not ACQUIRED", a.api.node, describe(nil, ev))})
	}
	return &held{stream: stream, cancel: cancel, token: ev.GetToken(), validFor: time.Duration(ev.GetValidForNanos())}, nil
}

// openLock sends the LockRequest and returns the node's first answer.
func openLock(ctx context.Context, conn *grpc.ClientConn, a lockArgs, wait, silence time.Duration) (*clientapi.LockEvent, clientapi.Client_LockClient, error) {
	stream, err := clientapi.NewClientClient(conn).Lock(ctx)
	if err != nil {
		return nil, nil, err
	}
	// A node that shuts down while it holds our lock keeps it until we end
	// the stream: after COMMAND's SIGTERM, --kill-after, its SIGKILL and
	// the wait for its output (cmd.WaitDelay).
	drain := a.killAfter + 2*time.Second
	req := &clientapi.LockRequest{Key: a.name, LeaseNanos: int64(a.lease), WaitNanos: int64(wait), Try: a.try, DrainNanos: int64(drain), HomeSilenceNanos: int64(silence)}
	if a.try && !a.waitSet {
		req.WaitNanos = 0
	}
	if err := stream.Send(req); err != nil {
		// Send reports io.EOF when the stream failed; Recv says why.
		if _, rerr := stream.Recv(); rerr != nil {
			err = rerr
		}
		return nil, nil, err
	}
	ev, err := stream.Recv()
	return ev, stream, err
}

// refusal says why the node did not grant the lock, by the gRPC code that
// clientapi.ToStatus gave homelock's error (or that gRPC gave a node it
// could not reach).
func refusal(a lockArgs, err error) *lockError {
	s, ok := status.FromError(err)
	if !ok {
		return &lockError{code: exitFailed, msg: fmt.Sprintf("node %s: %v", a.api.node, err)}
	}
	switch s.Code() {
	case codes.DeadlineExceeded:
		if a.try {
			return &lockError{code: exitTimedOut, msg: "not acquired (--try): " + s.Message()}
		}
		return &lockError{code: exitTimedOut, msg: fmt.Sprintf("not acquired within --wait %v: %s", a.wait, s.Message())}
	case codes.Unavailable:
		return &lockError{code: exitNoNode, msg: fmt.Sprintf("node %s unreachable: %s%s", a.api.node, s.Message(), a.api.hint(err)), tryNext: true}
	case codes.FailedPrecondition, codes.ResourceExhausted:
		hint := ""
		if len(a.nodes) == 1 && strings.Contains(s.Message(), delegation.NoAnswer) {
			// A home cut off from this node alone (a partial partition)
			// stays a member, so this node never hears from it; another
			// node may.
			hint = " (if that home is up, this node may be cut off from it: list another node too, --node A,B)"
		}
		return &lockError{code: exitNoLocks, msg: fmt.Sprintf("unavailable through node %s: %s%s", a.api.node, s.Message(), hint), tryNext: true}
	case codes.InvalidArgument:
		return &lockError{code: exitUsage, msg: fmt.Sprintf("refused by node %s (--lease %v, --wait %v): %s", a.api.node, a.lease, a.wait, s.Message())}
	}
	return &lockError{code: exitFailed, msg: fmt.Sprintf("node %s: %s (%s)", a.api.node, s.Message(), s.Code())}
}

// streamEnd is what ended a held lock's stream: RELEASED or not.
type streamEnd struct {
	released bool
	why      string
}

// hold runs COMMAND under the held lock h and returns homelock lock's exit
// status. The lock ends only after COMMAND, and on Linux every process it
// started, has exited.
func hold(a lockArgs, h *held, sigs <-chan os.Signal, stdout, stderr io.Writer) int {
	lease := newClientLease()
	// The lease is kept on the boot clock, which counts a suspend (Go's
	// monotonic clock does not): after a resume the lease must read as
	// run out if it has, as the node's own holder reads it (H9).
	clock := homelock.NewBootClock()
	// One goroutine reads the node's events, one pings for validity; sends
	// (pings, and the CloseSend that unlocks) share a mutex, as a stream
	// allows one sender at a time. Both end with the stream (h.cancel).
	ended := make(chan streamEnd, 1)
	firstValid := make(chan struct{})
	go func() {
		var once sync.Once
		for {
			ev, err := h.stream.Recv()
			if err == nil && ev.GetKind() == clientapi.LockEvent_KIND_VALID {
				lease.answered(ev.GetPing(), time.Duration(ev.GetValidForNanos()))
				once.Do(func() { close(firstValid) })
				continue
			}
			ended <- streamEnd{released: err == nil && ev.GetKind() == clientapi.LockEvent_KIND_RELEASED, why: describe(err, ev)}
			return
		}
	}()
	var sendMu sync.Mutex
	ping := func() error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return h.stream.Send(&clientapi.LockRequest{Ping: lease.ping(clock.Now())})
	}
	// ACQUIRED's validity only paces the pings: counted from the request it
	// may be nearly spent after a long wait, so the lease starts with the
	// first ping's answer. Nothing runs meanwhile, so waiting for it is safe.
	if err := ping(); err != nil {
		fmt.Fprintf(stderr, "homelock lock: %s: lock lost before COMMAND started (%v)\n", a.name, err)
		return exitLost
	}
	confirm := time.NewTimer(max(h.validFor, time.Second))
	select {
	case <-firstValid:
		confirm.Stop()
	case end := <-ended:
		fmt.Fprintf(stderr, "homelock lock: %s: lock lost before COMMAND started (%s)\n", a.name, end.why)
		return exitLost
	case <-confirm.C:
		fmt.Fprintf(stderr, "homelock lock: %s: node %s stopped answering before COMMAND started; COMMAND did not run\n", a.name, a.api.node)
		return exitNoNode
	case s := <-sigs:
		confirm.Stop()
		what := fmt.Sprintf("got %v", s)
		if s == parentGone {
			what = "killed (its supervisor is gone)"
		}
		fmt.Fprintf(stderr, "homelock lock: %s: %s before COMMAND started; COMMAND did not run\n", a.name, what)
		return 128 + signalNumber(s)
	}
	watchCtx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	ranOut := make(chan string, 1)

	cmd := exec.Command(a.command[0], a.command[1:]...)
	cmd.Stdin = os.Stdin
	cmd.Stdout, cmd.Stderr, stderr = commandOutput(stdout, stderr)
	say := func(msg string) { fmt.Fprintf(stderr, "homelock lock: %s: %s\n", a.name, msg) }
	// The watcher asks for a ping through the pinger, never sends one
	// itself: a send can block (a node that stopped reading fills the
	// stream's window), and the watcher must stop COMMAND all the same.
	pingNow := make(chan struct{}, 1)
	askNode := func() {
		select {
		case pingNow <- struct{}{}:
		default:
		}
	}
	go watchLease(watchCtx, lease, clock.Now, askNode, say, ranOut)
	cmd.Env = append(os.Environ(), "HOMELOCK_TOKEN="+h.token, "HOMELOCK_KEY="+a.name)
	// A process COMMAND left running may hold a pipe of its output open:
	// Wait returns this long after COMMAND itself exited regardless.
	cmd.WaitDelay = time.Second
	dieWithUs(cmd)
	defer adoptOrphans()()
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "homelock lock: %s: %v\n", a.name, err)
		return startCode(err)
	}
	tree := &commandTree{cmd: cmd.Process}
	tree.reapOrphans(watchCtx)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopPings, pinged := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(pinged)
		t := time.NewTicker(pingEvery(h.validFor))
		defer t.Stop()
		for {
			select {
			case <-stopPings:
				return
			case <-t.C:
			case <-pingNow:
			}
			if ping() != nil {
				return // the stream ended: the reader reports why
			}
		}
	}()
	var stopOnce sync.Once
	stopPinging := func() {
		stopOnce.Do(func() { close(stopPings) })
		<-pinged
	}
	defer stopPinging()

	var (
		lostWhy string
		kill    <-chan time.Time
		// Once COMMAND has exited: its status, and the end of the
		// processes it left running (nil while there are none to wait for).
		cmdErr   error
		cmdDone  bool
		treeGone <-chan struct{}
		// killed: the supervisor is gone (a SIGKILL to `homelock lock`):
		// the whole tree is SIGKILLed and the lock held until it is empty.
		killed bool
	)
	finish := func() int {
		if lostWhy != "" {
			fmt.Fprintf(stderr, "homelock lock: %s: COMMAND ended (%s) after the lock was lost\n", a.name, commandEnd(cmdErr))
			return exitLost
		}
		return release(a, h, cmdErr, stopPinging, &sendMu, ended, stderr)
	}
	stopCommand := func(s os.Signal, all bool) {
		tree.signal(s, all)
		if kill == nil {
			kill = time.After(a.killAfter)
		}
	}
	lost := func(why string) {
		if lostWhy != "" {
			return
		}
		lostWhy = why
		fmt.Fprintf(stderr, "homelock lock: %s: lock lost (%s); stopping COMMAND\n", a.name, why)
		// Every process, not COMMAND alone: a shell dies of SIGTERM
		// without passing it to the program it waits for.
		stopCommand(syscall.SIGTERM, true)
	}
	for {
		select {
		case err := <-exited:
			cmdErr, cmdDone = err, true
			tree.exited()
			left := tree.left()
			if len(left) == 0 {
				return finish()
			}
			if a.releaseAtExit && lostWhy == "" && !killed {
				// A lost lock's stop still goes to the end: what COMMAND
				// started was in its critical section.
				fmt.Fprintf(stderr, "homelock lock: %s: COMMAND exited (%s); releasing the lock, what it left running (%s) runs on without it (--release-at-exit)\n",
					a.name, commandEnd(err), pids(left))
				return finish()
			}
			if lostWhy == "" && kill == nil && !killed {
				fmt.Fprintf(stderr, "homelock lock: %s: COMMAND exited (%s); holding the lock until what it left running exits (%s; --release-at-exit would not wait)\n",
					a.name, commandEnd(err), pids(left))
			}
			treeGone = tree.waitEmpty(watchCtx)
		case <-treeGone:
			return finish()
		case s := <-sigs:
			if killed {
				continue // everything is being killed already
			}
			if s == parentGone {
				killed = true
				fmt.Fprintf(stderr, "homelock lock: %s: killed (its supervisor is gone): killing COMMAND and every process it started; the lock is held until they have exited\n", a.name)
				tree.killAll()
				kill = nil
				continue
			}
			if _, ok := s.(fromTerminal); ok {
				// The terminal sent it to the whole foreground process
				// group, COMMAND's processes (ours) included. Passing it on
				// would make one Ctrl-C two, which many programs take for
				// "stop now" ("Two interrupts received. Exiting
				// immediately"), in the middle of their critical section.
				fmt.Fprintf(stderr, "homelock lock: %s: interrupt from the terminal, which COMMAND got too; the lock is held until it exits\n", a.name)
				continue
			}
			if kill == nil {
				what := "COMMAND; the lock is held until it exits"
				if cmdDone {
					what = "the processes COMMAND left running; the lock is held until they exit"
				}
				fmt.Fprintf(stderr, "homelock lock: %s: passing %v to %s (SIGKILL in %v)\n", a.name, s, what, a.killAfter)
			}
			stopCommand(s, false)
		case end := <-ended:
			lost(end.why)
		case why := <-ranOut:
			lost(why)
		case <-kill:
			tree.killAll()
			kill = nil
		}
	}
}

// release unlocks after COMMAND exited with err and returns the status:
// COMMAND's, unless the node reports the lock was lost before the unlock.
func release(a lockArgs, h *held, err error, stopPinging func(), sendMu *sync.Mutex, ended <-chan streamEnd, stderr io.Writer) int {
	stopPinging()
	sendMu.Lock()
	_ = h.stream.CloseSend()
	sendMu.Unlock()
	select {
	case end := <-ended:
		if !end.released {
			fmt.Fprintf(stderr, "homelock lock: %s: COMMAND ended (%s), but the lock had ended first (%s)\n", a.name, commandEnd(err), end.why)
			return exitLost
		}
	case <-time.After(5 * time.Second):
		// COMMAND is done; the node will unlock when the stream ends.
	}
	return exitCode(err)
}

// commandEnd says how COMMAND ended, for a message.
func commandEnd(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.String()
	}
	if err != nil && !errors.Is(err, exec.ErrWaitDelay) {
		return err.Error()
	}
	return "exit status 0"
}

// watchLease reports on ranOut once the lease's deadline passes on now,
// this process's clock, without the node having extended it (ctx ends it).
// It reads now at least every leaseCheck: Go's timers run on the monotonic
// clock, which stops during a suspend, so a timer set for the deadline
// would fire that much after it.
//
// A lease that ran out while this process itself did not run (two readings
// more than stallAfter apart: Ctrl-Z and fg, a debugger, a suspend) is first
// put to the node: askNode has a ping sent (it does not wait for the send),
// and an answer within confirmWithin that the lock is still held keeps it.
// The node held it all along if it says so (a section that ended never
// comes back), and COMMAND, stopped with this process by job control or
// not, resumed with it either way: ending it at once would only have ended
// a critical section that still holds its lock. say reports the question
// and the answer. In a lease's last pingAhead it asks the node at every
// reading too.
func watchLease(ctx context.Context, lease *clientLease, now func() time.Time, askNode func(), say func(string), ranOut chan<- string) {
	t := time.NewTimer(0)
	defer t.Stop()
	var prev, asked time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		at := now()
		gap := at.Sub(prev)
		stalled := !prev.IsZero() && gap > stallAfter
		prev = at
		left := lease.until().Sub(at)
		next := min(left, leaseCheck)
		switch {
		case left > 0:
			if !asked.IsZero() {
				say("the node says the lock is still held; COMMAND goes on")
				asked = time.Time{}
			}
			if left < pingAhead {
				askNode()
				next = min(left, max(left/4, minAskGap))
			}
		case stalled:
			say(fmt.Sprintf("this process did not run for %v (stopped, or the machine suspended) and its lease ran out meanwhile; asking the node whether the lock is still held",
				gap.Round(time.Millisecond)))
			asked, next = at, min(confirmWithin, leaseCheck)
			askNode()
		case !asked.IsZero() && at.Sub(asked) < confirmWithin:
			next = min(confirmWithin-at.Sub(asked), leaseCheck)
		case !asked.IsZero():
			ranOut <- fmt.Sprintf("its lease ran out while this process did not run, and the node did not say the lock is still held within %v", confirmWithin)
			return
		default:
			ranOut <- "its lease ran out on this client's clock with no word from the node"
			return
		}
		t.Reset(next)
	}
}

// pingAhead is how much lease is left when watchLease starts asking the
// node for a ping at every reading, and reading more often as less is left
// (every quarter of what is left, at least minAskGap apart). The pinger's
// own pace is a fifth of the lease's first validity, so a renewal that
// reached the node late in the lease (its answer relayed around a cut
// that came just as it was due, say) would otherwise be heard only at the
// next regular ping, which may come after the deadline: the command
// stopped while the node still held its lock.
const pingAhead = 2 * leaseCheck

// minAskGap bounds how often watchLease asks for a ping as the deadline
// nears.
const minAskGap = 5 * time.Millisecond

// stallAfter is a gap between watchLease's readings (every leaseCheck) that
// only a process that did not run makes.
const stallAfter = 10 * leaseCheck

// confirmWithin is how long the node has to say a lease that ran out during
// a stall still holds.
var confirmWithin = answerMargin

// leaseCheck is how long after a resume from suspend the lock command
// notices a lease that ran out during it.
const leaseCheck = 50 * time.Millisecond

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
		return "the node reports it lost: " + ev.GetDetail()
	}
	return ev.GetKind().String()
}

// commandOutput returns COMMAND's stdout and stderr, and the stderr the
// lock command writes to from then on. A file is COMMAND's as it is: a pipe
// copied into it would end with cmd.Wait, and a process COMMAND left
// running would then die of SIGPIPE at its next line. Other writers (tests'
// buffers) take a pipe, and a stderr both write to goes through one mutex
// (which also hides a bytes.Buffer's ReadFrom, which a concurrent Write
// races).
func commandOutput(stdout, stderr io.Writer) (cmdOut, cmdErr, ownErr io.Writer) {
	cmdOut, cmdErr, ownErr = stdout, stderr, stderr
	if _, ok := stdout.(*os.File); !ok {
		cmdOut = &syncWriter{w: stdout}
	}
	if _, ok := stderr.(*os.File); !ok {
		w := &syncWriter{w: stderr}
		cmdErr, ownErr = w, w
	}
	return cmdOut, cmdErr, ownErr
}

// terminalForeground reports whether stdin is a terminal whose foreground
// process group is this process's: then a SIGINT it gets may be the
// terminal's (Ctrl-C), which every process of the group got (relaySignals
// tells which). Stdin alone is asked, as a foreground job reads it: `go test
// -v` gives a test its terminal as stdout, not stdin.
func terminalForeground() bool {
	fg, err := unix.IoctlGetInt(0, unix.TIOCGPGRP)
	return err == nil && fg == unix.Getpgrp()
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
