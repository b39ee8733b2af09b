package clustertest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The exit statuses `homelock lock` documents (cmd/homelock/exitcode.go).
const (
	lockExitLost     = 120
	lockExitNoNode   = 121
	lockExitNoLocks  = 122
	lockExitTimedOut = 123
)

// waitSlack bounds how far past --wait a lock command may end: the node's
// RetryInterval (100ms by default) and the lock command's answer margin
// (two of them), plus starting a process on a loaded machine.
const waitSlack = 1200 * time.Millisecond

// Three `homelock node` processes. `homelock lock` never leaves its
// command running without the lock: a signal to it goes to the command,
// and the next locker (through another node) starts only after the command
// exited. --wait holds against a SIGSTOPped node, a silent home and a port
// that accepts and never answers.
func TestProcessesLockCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the homelock command (-short)")
	}
	dir := t.TempDir()
	bin := buildHomelock(t, dir)
	procs := startProcessCluster(t, bin, dir, "lockcmd", shortLeases...)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		t.Run("signal/"+sig.String(), func(t *testing.T) { signalledHolder(t, bin, dir, procs, sig) })
	}
	t.Run("signal/terminal", func(t *testing.T) { terminalInterrupt(t, bin, dir, procs, "") })
	for _, to := range []string{"supervisor", "lock-command"} {
		t.Run("signal/terminal-kill/"+to, func(t *testing.T) { terminalInterrupt(t, bin, dir, procs, to) })
	}
	t.Run("leftover", func(t *testing.T) { leftoverHolds(t, bin, dir, procs) })
	t.Run("job-control", func(t *testing.T) { jobControl(t, bin, dir, procs) })
	for _, k := range killings {
		t.Run(k.name, func(t *testing.T) { killedHolder(t, bin, dir, procs, k) })
	}
	t.Run("release-at-exit", func(t *testing.T) { releasedAtExit(t, bin, dir, procs) })
	t.Run("wait/mute-port", func(t *testing.T) { muteNode(t, bin) })
	t.Run("wait/stopped-node", func(t *testing.T) { stoppedNode(t, bin, procs) })
	// It stops n3.
	t.Run("home/SIGTERM", func(t *testing.T) { homeStopsUnderHolder(t, bin, dir, procs) })
	// Last: it stops n1.
	t.Run("node/SIGTERM", func(t *testing.T) { nodeStopsUnderHolder(t, bin, dir, procs) })
}

// homeStopsUnderHolder: `homelock lock` holds a key homed at n3 through n1,
// its command running 3s (nearly four of the cluster's 800ms leases), when
// n3 gets SIGTERM. n3 leaves and hands the running delegation to the key's
// new home, so the command runs to its end under the lock and the lock
// command exits 0; a locker through n2 then gets the key. (Before lock
// protocol v3 the section ended at its lease, about a second after the
// SIGTERM, and the lock command exited 120.)
func homeStopsUnderHolder(t *testing.T, bin, dir string, procs []*hlProc) {
	key := keyHomedAt("n3", "home-stops")
	started, finished := filepath.Join(dir, key+"-started"), filepath.Join(dir, key+"-finished")
	script := fmt.Sprintf(`touch %q; sleep 3; touch %q`, started, finished)
	n3 := procs[2]
	// A leaving node hands its keys off only while every other member looks
	// alive in gossip (docs/membership.md); n2 was just SIGSTOPped.
	// n2 may have been agreed down meanwhile and be rejoining; the last
	// status says which, should the wait time out.
	var last string
	waitFor(t, 30*time.Second, "n3 to see every member alive", func() bool {
		st, err := statusOf(bin, n3.api)
		if err != nil {
			last = err.Error()
			return false
		}
		last = fmt.Sprintf("epoch %d, phase %q, available %v (%s), members %+v", st.Epoch, st.Phase, st.Available, st.Reason, st.Members)
		if len(st.Members) != 3 {
			return false
		}
		for _, m := range st.Members {
			if m.Liveness != "alive" {
				return false
			}
		}
		return true
	}, func() string { return "n3's last status: " + last }, func() string {
		select {
		case err := <-procs[1].done:
			procs[1].done <- err
			return fmt.Sprintf("n2 exited: %v", err)
		default:
			return "n2 runs"
		}
	})
	first, exited := startHeld(t, bin, procs[0].api, key, script, started)
	if err := n3.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		t.Fatal("the lock command never exited")
	}
	if code := first.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("SIGTERM to %s's home n3: the lock command through n1 exited %d, want 0 (its command ran to its end)\n%s", key, code, first.said())
	}
	if _, err := os.Stat(finished); err != nil {
		t.Fatalf("the command did not finish: %v\n%s", err, first.said())
	}
	select {
	case err := <-n3.done:
		n3.done <- err
		if err != nil {
			t.Fatalf("n3 after SIGTERM: %v\n%s", err, n3.out)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("n3 still runs 30s after SIGTERM\n%s", n3.out)
	}
	out, err := exec.Command(bin, "lock", key, "--node", procs[1].api, "--wait", "20s", "--", "echo", "next").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "next" {
		t.Fatalf("the next lock of %s through n2: %v\n%s", key, err, out)
	}
	t.Logf("SIGTERM to the home of a held key: the 3s command ran to its end under the lock (exit 0); n2 locked it next")
}

// nodeStopsUnderHolder: `homelock lock --kill-after 14s` holds a key (homed
// at n2) through n1; its command traps TERM, takes 11s to finish and exits
// 3. n1 gets SIGTERM, a controlled shutdown: it tells the lock command at
// once, which stops its command, and keeps the lock until the command has
// exited. A locker through n2 (n3 has stopped), started right after the
// SIGTERM, must begin after the command finished; the first lock command
// exits 120 (lost) and n1 exits 0. (Before, n1 cut the stream after 2s and
// released at once, and then after 10s whatever the lock command's
// --kill-after: the next holder began while the command still ran its
// cleanup.)
func nodeStopsUnderHolder(t *testing.T, bin, dir string, procs []*hlProc) {
	key := keyHomedAt("n2", "node-stops")
	started, finished := filepath.Join(dir, key+"-started"), filepath.Join(dir, key+"-finished")
	script := fmt.Sprintf(`trap 'sleep 11; touch %q; exit 3' TERM; touch %q; i=0; while [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; touch %q`,
		finished, started, finished)
	first, exited := startHeld(t, bin, procs[0].api, key, script, started, "--kill-after", "14s")
	n1 := procs[0]
	if err := n1.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	out, err := exec.Command(bin, "lock", key, "--node", procs[1].api, "--wait", "20s", "--",
		"sh", "-c", fmt.Sprintf("if [ -e %q ]; then echo after; else echo OVERLAP; fi", finished)).CombinedOutput()
	took := time.Since(stopped)
	if err != nil {
		t.Fatalf("the second lock of %s: %v\n%s", key, err, out)
	}
	var code int
	select {
	case <-exited:
		code = first.cmd.ProcessState.ExitCode()
	case <-time.After(10 * time.Second):
		t.Fatal("the first lock command never exited")
	}
	firstSaid := first.said()
	if got := strings.TrimSpace(string(out)); got != "after" {
		t.Fatalf("SIGTERM to n1: the next critical section on %s began while the command under n1 still ran (%q; first exited %d)\nfirst: %s",
			key, got, code, firstSaid)
	}
	if code != lockExitLost || !strings.Contains(firstSaid, "shutting down") {
		t.Fatalf("the lock command through the stopping n1 exited %d, want %d with the reason\n%s", code, lockExitLost, firstSaid)
	}
	select {
	case err := <-n1.done:
		n1.done <- err
		if err != nil {
			t.Fatalf("n1 after SIGTERM: %v\n%s", err, n1.out)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("n1 still runs 30s after SIGTERM\n%s", n1.out)
	}
	t.Logf("SIGTERM to n1 under a holder: its command finished under the lock (exit %d); the next locker through n2 got %s %v after the SIGTERM",
		code, key, took.Round(time.Millisecond))
}

// signalledHolder: `homelock lock` holds a key (homed at n2) through n1;
// its command traps sig, takes 200ms to finish and exits 3. The lock
// command gets sig, and a locker through n3 starts at once: its critical
// section must begin after the command finished, and the first lock
// command exits with the command's status.
func signalledHolder(t *testing.T, bin, dir string, procs []*hlProc, sig syscall.Signal) {
	name := map[syscall.Signal]string{syscall.SIGTERM: "TERM", syscall.SIGINT: "INT", syscall.SIGHUP: "HUP"}[sig]
	key := keyHomedAt("n2", "signalled-"+strings.ToLower(name))
	started, finished := filepath.Join(dir, key+"-started"), filepath.Join(dir, key+"-finished")
	// Bounded (5 s) even if it never gets the signal, as on a lock command
	// that does not pass it on.
	script := fmt.Sprintf(`trap 'sleep 0.2; touch %q; exit 3' %s; touch %q; i=0; while [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done; touch %q`,
		finished, name, started, finished)
	first, exited := startHeld(t, bin, procs[0].api, key, script, started)
	if err := first.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	signalled := time.Now()
	out, err := exec.Command(bin, "lock", key, "--node", procs[1].api, "--wait", "20s", "--",
		"sh", "-c", fmt.Sprintf("if [ -e %q ]; then echo after; else echo OVERLAP; fi", finished)).CombinedOutput()
	took := time.Since(signalled)
	if err != nil {
		t.Fatalf("%v: the second lock of %s: %v\n%s", sig, key, err, out)
	}
	var code int
	select {
	case <-exited:
		code = first.cmd.ProcessState.ExitCode()
		if ws, ok := first.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%v: the first lock command never exited", sig)
	}
	firstSaid := first.said()
	if got := strings.TrimSpace(string(out)); got != "after" {
		t.Fatalf("%v to the lock command: the next critical section on %s began while its command still ran (%q; first exited %d)\nfirst: %s",
			sig, key, got, code, firstSaid)
	}
	if code != 3 {
		t.Fatalf("%v: the first lock command exited %d, want its command's 3\n%s", sig, code, firstSaid)
	}
	t.Logf("%v to the lock command: its command finished and exited 3 under the lock; the next locker through n3 got %s %v after the signal",
		sig, key, took.Round(time.Millisecond))
}

// terminalInterrupt: `homelock lock` runs on a terminal as a shell's
// foreground job would, and the user types Ctrl-C (killTo ""). The terminal
// sends SIGINT to the whole foreground process group, the command included:
// the lock command must not pass it on as well (one Ctrl-C would be two,
// which many programs take for "stop now"), and holds the lock until the
// command, which traps it and finishes its loop, exits. A kill -INT from
// elsewhere of the supervisor (the PID the user started) or of the lock
// command below it (killTo) reaches that process alone: it is passed on,
// and the command gets it once all the same.
func terminalInterrupt(t *testing.T, bin, dir string, procs []*hlProc, killTo string) {
	master, tty := openPTY(t)
	key := keyHomedAt("n2", "terminal"+killTo)
	started, got := filepath.Join(dir, key+"-started"), filepath.Join(dir, key+"-got")
	// Three seconds: a kill -INT is passed on once a second has passed
	// without the other process's.
	script := fmt.Sprintf(`trap 'echo INT >> %q' INT; touch %q; i=0; while [ $i -lt 60 ]; do sleep 0.05; i=$((i+1)); done; exit 6`, got, started)
	cmd := exec.Command(bin, "lock", key, "--node", procs[0].api, "--", "sh", "-c", script)
	onTerminal(cmd, tty)
	if err := dieWithTest(cmd).Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	var mu sync.Mutex
	var said strings.Builder
	go func() { _, _ = io.Copy(lockedWriter{&mu, &said}, master) }()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	waitFor(t, 30*time.Second, "the command to run under the lock", func() bool {
		_, err := os.Stat(started)
		return err == nil
	})
	how := "Ctrl-C on the terminal"
	switch killTo {
	case "":
		if _, err := master.Write([]byte{3}); err != nil {
			t.Fatal(err)
		}
	case "supervisor":
		how = "kill -INT of the supervisor"
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
	case "lock-command":
		how = "kill -INT of the lock command"
		kids := childrenOf(cmd.Process.Pid)
		if len(kids) != 1 {
			t.Fatalf("the supervisor (PID %d) has children %v, want one: the lock command", cmd.Process.Pid, kids)
		}
		if err := syscall.Kill(kids[0], syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		t.Fatal("the lock command never exited")
	}
	// What the lock command wrote when it got the SIGINT reaches the
	// master through the copying goroutine, which may trail its exit.
	var out string
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		out = said.String()
		mu.Unlock()
		if strings.Contains(out, "interrupt") || time.Now().After(end) {
			break
		}
	}
	b, _ := os.ReadFile(got)
	wantSaid, notSaid := "interrupt from the terminal", "passing interrupt"
	if killTo != "" {
		wantSaid, notSaid = notSaid, wantSaid
	}
	if code := cmd.ProcessState.ExitCode(); code != 6 || strings.Count(string(b), "INT") != 1 ||
		strings.Contains(out, notSaid) || !strings.Contains(out, wantSaid) {
		t.Fatalf("%s: the lock command exited %d (want its command's 6), its command trapped %d SIGINTs (want 1), and it said (want %q, not %q):\n%s",
			how, code, strings.Count(string(b), "INT"), wantSaid, notSaid, out)
	}
	t.Logf("%s: the command got one SIGINT and finished under the lock; the lock command said: %s", how, strings.TrimSpace(out))
}

// leftoverHolds: the command puts its work in the background and exits at
// once; the work goes on for two seconds (past exec.Cmd.WaitDelay, a second) and prints a line on the lock
// command's output. The lock is held until the work has ended, its line
// reaches the output (no SIGPIPE), and a locker through n3 starts only then.
func leftoverHolds(t *testing.T, bin, dir string, procs []*hlProc) {
	key := keyHomedAt("n2", "leftover")
	started, finished := filepath.Join(dir, key+"-started"), filepath.Join(dir, key+"-finished")
	script := fmt.Sprintf(`(sleep 2; touch %q; echo late) & touch %q; exit 5`, finished, started)
	first, exited := startHeld(t, bin, procs[0].api, key, script, started)
	out, err := exec.Command(bin, "lock", key, "--node", procs[2].api, "--wait", "20s", "--",
		"sh", "-c", fmt.Sprintf("if [ -e %q ]; then echo after; else echo OVERLAP; fi", finished)).CombinedOutput()
	if err != nil {
		t.Fatalf("the second lock of %s: %v\n%s", key, err, out)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the first lock command never exited")
	}
	said := first.said()
	if got := strings.TrimSpace(string(out)); got != "after" {
		t.Fatalf("the next critical section on %s began while the first command's background work still ran (%q)\nfirst: %s", key, got, said)
	}
	if code := first.cmd.ProcessState.ExitCode(); code != 5 || !strings.Contains(said, "late") {
		t.Fatalf("the first lock command exited %d (want its command's 5) and said (want the background work's line):\n%s", code, said)
	}
	t.Logf("the background work ended under the lock; the first lock command said: %s", strings.TrimSpace(said))
}

// jobControl: Ctrl-Z, then fg after several leases (SIGSTOP and SIGCONT to
// the lock command's process group, as a shell sends them). The node held
// the lock throughout (a locker through n3 is refused meanwhile); the lock
// command, finding on resuming that its lease ran out while it did not
// run, asks the node, which says the lock is still held, and COMMAND runs
// to its end. It used to be stopped at once, exit 120.
func jobControl(t *testing.T, bin, dir string, procs []*hlProc) {
	key := keyHomedAt("n2", "jobcontrol")
	started, finished := filepath.Join(dir, key+"-started"), filepath.Join(dir, key+"-finished")
	// COMMAND's sleep counts on through the stop (Linux restarts it
	// against its first deadline), so it must outlast the stop (about 3 s)
	// by enough for the node's answer to arrive before COMMAND ends: with
	// `sleep 3` it could end first, and the answer was never said.
	held, exited := startHeld(t, bin, procs[0].api, key, fmt.Sprintf(`touch %q; sleep 6; touch %q`, started, finished), started)
	group := -held.cmd.Process.Pid
	if err := syscall.Kill(group, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	lockWithin(t, bin, "while the holder is stopped", key, procs[2].api, time.Second, lockExitTimedOut)
	time.Sleep(2 * time.Second) // 800 ms leases
	if err := syscall.Kill(group, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		t.Fatal("the lock command never exited")
	}
	said := held.said()
	if code := held.cmd.ProcessState.ExitCode(); code != 0 || !strings.Contains(said, "the node says the lock is still held") {
		t.Fatalf("after Ctrl-Z and fg the lock command exited %d (want 0, COMMAND run to its end) and said:\n%s", code, said)
	}
	if _, err := os.Stat(finished); err != nil {
		t.Fatalf("COMMAND did not finish: %v\n%s", err, said)
	}
	t.Logf("stopped and resumed: %s", strings.TrimSpace(said))
}

// A killing of `homelock lock` (the process the user started, its
// supervisor, or the lock command proper below it) while COMMAND waits for
// a sleep it put in the background.
type killing struct {
	name   string
	client bool // the lock command proper, not the supervisor
	sig    syscall.Signal
	// wantCode is the supervisor's exit status (-1: killed itself) and
	// wantSaid what `homelock lock` says.
	wantCode int
	wantSaid string
}

var killings = []killing{
	// The lock command, which still holds the lock, kills COMMAND and the
	// sleep, and only then lets the lock go. Before the supervisor, the
	// sleep ran on without the lock.
	{name: "SIGKILL/lock-command", sig: syscall.SIGKILL, wantCode: -1, wantSaid: "killed (its supervisor is gone): killing COMMAND and every process it started"},
	// The client the OOM killer would pick: its lock ends with it; the
	// supervisor kills the sleep.
	{name: "SIGKILL/lock-client", client: true, sig: syscall.SIGKILL, wantCode: 1,
		wantSaid: "died of signal 9 (killed), which ended its lock; killed what COMMAND left running (PID"}, // PID or PIDs: COMMAND may not have died of its parent-death signal yet
	// Go's runtime dumps the goroutines and exits 2 on SIGQUIT, as on a
	// panic: an exit, not a death by signal, with processes left.
	{name: "SIGQUIT/lock-client", client: true, sig: syscall.SIGQUIT, wantCode: 2,
		wantSaid: "exited (status 2) with processes left below it; killed them (PID"},
}

// killedHolder: COMMAND puts a sleep in the background and waits for it,
// and k kills the lock command. The sleep must be gone afterwards, and
// when the supervisor was killed, before the next locker (through n3) got
// the lock.
func killedHolder(t *testing.T, bin, dir string, procs []*hlProc, k killing) {
	name := strings.ReplaceAll(strings.ToLower(k.name), "/", "-")
	key := keyHomedAt("n2", "killed-"+name)
	started, bgFile := filepath.Join(dir, key+"-started"), filepath.Join(dir, key+"-bg")
	first, exited := startHeld(t, bin, procs[0].api, key, fmt.Sprintf(`sleep 300 & echo $! > %q; touch %q; wait`, bgFile, started), started)
	bg := backgroundPID(t, bgFile)
	supervisor := first.cmd.Process.Pid
	lockCmd := childrenOf(supervisor)
	if len(lockCmd) != 1 || !processLive(bg) {
		t.Fatalf("below the supervisor (PID %d): %v, want the lock command alone; background sleep %d live: %v", supervisor, lockCmd, bg, processLive(bg))
	}
	victim := supervisor
	if k.client {
		victim = lockCmd[0]
	}
	if err := syscall.Kill(victim, k.sig); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "lock", key, "--node", procs[2].api, "--wait", "20s", "--",
		"sh", "-c", fmt.Sprintf(`if grep -qs ') [^Z]' /proc/%d/stat; then echo OVERLAP; else echo after; fi`, bg)).CombinedOutput()
	if err != nil {
		t.Fatalf("the next lock of %s: %v\n%s", key, err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "after" && !k.client {
		t.Fatalf("the next critical section on %s began while the background sleep still ran (%q)\nfirst: %s", key, got, first.said())
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("the lock command's processes never exited\n%s", first.said())
	}
	said := first.said()
	waitFor(t, 5*time.Second, "the background sleep to be gone", func() bool { return !processLive(bg) })
	waitFor(t, 5*time.Second, "the lock command to be gone", func() bool { return !processLive(lockCmd[0]) })
	if code := first.cmd.ProcessState.ExitCode(); code != k.wantCode || !strings.Contains(said, k.wantSaid) {
		t.Fatalf("homelock lock exited %d and said, want %d and %q:\n%s", code, k.wantCode, k.wantSaid, said)
	}
	if i := strings.LastIndex(said, "homelock lock:"); i >= 0 {
		said = said[i:] // past a SIGQUIT's goroutine dump
	}
	t.Logf("%s: the background sleep is gone; the next locker saw %s; then: %s", k.name, strings.TrimSpace(string(out)), strings.TrimSpace(said))
}

// releasedAtExit: with --release-at-exit, what COMMAND started runs on
// after the lock command returns; the supervisor leaves it be.
func releasedAtExit(t *testing.T, bin, dir string, procs []*hlProc) {
	key := keyHomedAt("n2", "released-at-exit")
	started, bgFile := filepath.Join(dir, key+"-started"), filepath.Join(dir, key+"-bg")
	first, exited := startHeld(t, bin, procs[0].api, key, fmt.Sprintf(`sleep 300 > /dev/null 2>&1 & echo $! > %q; touch %q`, bgFile, started), started, "--release-at-exit")
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("homelock lock --release-at-exit never exited\n%s", first.said())
	}
	bg := backgroundPID(t, bgFile)
	time.Sleep(200 * time.Millisecond)
	if code := first.cmd.ProcessState.ExitCode(); code != 0 || !processLive(bg) {
		t.Fatalf("homelock lock --release-at-exit exited %d (want 0), the sleep it left live: %v (want true)\n%s", code, processLive(bg), first.said())
	}
}

// backgroundPID reads the PID a script wrote to file (its background
// job's), which the test's cleanup kills should it still run.
func backgroundPID(t *testing.T, file string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	return pid
}

// childrenOf lists the live processes whose parent is pid.
func childrenOf(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f := procStat(child); len(f) > 1 && f[0] != "Z" && f[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}

// processLive reports whether pid is a process that has not exited (a
// zombie has).
func processLive(pid int) bool {
	f := procStat(pid)
	return len(f) > 1 && f[0] != "Z"
}

// procStat is /proc/PID/stat's fields after the command name (which may
// hold spaces): the state, the parent, ...; nil if there is no such process.
func procStat(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	return strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
}

// heldCommand is `homelock lock KEY --node API -- sh -c SCRIPT`, running.
type heldCommand struct {
	cmd *exec.Cmd
	mu  sync.Mutex
	out strings.Builder
}

func (h *heldCommand) said() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.out.String()
}

// startHeld starts the lock command, in a process group of its own, and
// returns once its script has touched started (it runs under the lock),
// with a channel for its exit.
func startHeld(t *testing.T, bin, api, key, script, started string, flags ...string) (*heldCommand, <-chan error) {
	t.Helper()
	args := append(append([]string{"lock", key, "--node", api}, flags...), "--", "sh", "-c", script)
	h := &heldCommand{cmd: exec.Command(bin, args...)}
	h.cmd.Stdout, h.cmd.Stderr = lockedWriter{&h.mu, &h.out}, lockedWriter{&h.mu, &h.out}
	// A process group of its own, as a shell's job: job control signals
	// the whole group.
	h.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := dieWithTest(h.cmd).Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- h.cmd.Wait() }()
	t.Cleanup(func() { _ = h.cmd.Process.Kill() })
	waitFor(t, 30*time.Second, "the command to run under the lock", func() bool {
		_, err := os.Stat(started)
		return err == nil
	})
	return h, exited
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// exitStatus is the status a command that ended with err exited with, and
// false if it did not run to an exit at all.
func exitStatus(err error) (int, bool) {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), true
	}
	return 0, err == nil
}

// lockWithin runs `homelock lock KEY --node API --wait WAIT -- echo ran`
// (from any goroutine) and fails the test unless it ended within WAIT + waitSlack with one of
// the exit statuses in want, without running its command.
func lockWithin(t *testing.T, bin, what, key, api string, wait time.Duration, want ...int) {
	t.Helper()
	start := time.Now()
	out, err := exec.Command(bin, "lock", key, "--node", api, "--wait", wait.String(), "--", "echo", "ran").CombinedOutput()
	took := time.Since(start)
	code, exited := exitStatus(err)
	if !exited {
		t.Errorf("%s: %v", what, err)
		return
	}
	if took > wait+waitSlack {
		t.Errorf("%s: --wait %v returned after %v (exit %d)\n%s", what, wait, took.Round(time.Millisecond), code, out)
	}
	ok := false
	for _, w := range want {
		ok = ok || code == w
	}
	if !ok || strings.Contains(string(out), "ran") {
		t.Errorf("%s: exit %d, want one of %v, command not run\n%s", what, code, want, out)
	}
	t.Logf("%s: --wait %v returned in %v, exit %d: %s", what, wait, took.Round(time.Millisecond), code, strings.TrimSpace(string(out)))
}

// muteNode: a port that accepts connections and never answers.
func muteNode(t *testing.T, bin string) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	defer func() {
		_ = l.Close()
		<-done
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	lockWithin(t, bin, "a port that accepts and never answers", "mute", l.Addr().String(), 2*time.Second, lockExitNoNode)
}

// stoppedNode: n2 is SIGSTOPped. A locker through n2 (frozen: its kernel
// still accepts) and one through n1 for a key homed at n2 (a silent home)
// both give up within their --wait; one given n2 then n1 locks through n1.
func stoppedNode(t *testing.T, bin string, procs []*hlProc) {
	key := keyHomedAt("n2", "stopped")
	n2 := procs[1].cmd.Process
	if err := n2.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = n2.Signal(syscall.SIGCONT) }()
	var wg sync.WaitGroup
	wg.Go(func() {
		lockWithin(t, bin, "through a SIGSTOPped node", key, procs[1].api, 2*time.Second, lockExitNoNode)
	})
	wg.Go(func() {
		lockWithin(t, bin, "through n1, home n2 SIGSTOPped", key, procs[0].api, 2*time.Second, lockExitNoLocks, lockExitTimedOut)
	})
	// With n1 listed after n2, the frozen n2 gives way to n1 within the
	// lock command's connect bound (2 s), for a key whose home is alive.
	wg.Go(func() {
		start := time.Now()
		out, err := exec.Command(bin, "lock", keyHomedAt("n1", "stopped"), "--node", procs[1].api+","+procs[0].api, "--wait", "6s", "--", "echo", "ran").CombinedOutput()
		took := time.Since(start)
		if err != nil || !strings.Contains(string(out), "ran") || !strings.Contains(string(out), "trying "+procs[0].api) || took > 6*time.Second {
			t.Errorf("through n2 (SIGSTOPped), then n1: %v after %v\n%s", err, took.Round(time.Millisecond), out)
		}
		t.Logf("through n2 (SIGSTOPped), then n1: ran after %v: %s", took.Round(time.Millisecond), strings.TrimSpace(string(out)))
	})
	wg.Wait()
}
