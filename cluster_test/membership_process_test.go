package clustertest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/homelock/homelock"
	"github.com/homelock/homelock/clientapi"
	"github.com/homelock/homelock/fence"
)

var membershipCut = flag.Duration("membership.cut", 20*time.Second,
	"how long TestProcessesMembership stops a node (SIGSTOP) to cut it off; 45s is the long run")

// Real processes, started from the README's three-node recipe as written
// (its ports mapped to free ones, /tmp to a test directory): the cluster
// forms and answers status while it does; a duplicate node ID is refused and
// the real node keeps its membership; two of three killed with SIGKILL and
// restarted as `homelock node --help` says (no --join, no --bootstrap) lock
// again; a node stopped for longer than DownAfter and memberlist's gossip to
// the dead is taken back in; a node closed with SIGTERM and started again
// joins; the whole cluster killed at once, and then stopped with SIGTERM at
// once, starts again as the help says and locks every key, with tokens above
// every one before. Each step logs its time-to-lockable.
func TestProcessesMembership(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the homelock command (-short)")
	}
	dir := t.TempDir()
	bin := buildHomelock(t, dir)
	nodes := readmeRecipe(t, dir)
	procs := map[string]*mproc{}
	t.Cleanup(func() { stopProcs(t, procs) })
	ids := []string{"n1", "n2", "n3"}
	api := func(id string) string { return flagValue(nodes[id], "--api-addr") }

	// n1 alone: it answers status at once and says what it waits for.
	begin := time.Now()
	procs["n1"] = startNode(t, bin, "n1", nodes["n1"])
	var st clientapi.StatusReport
	waitFor(t, 10*time.Second, "n1 to answer status while it bootstraps", func() bool {
		var err error
		st, err = statusOf(bin, api("n1"))
		return err == nil
	})
	if want := "bootstrapping: waiting for n2, n3 in gossip"; st.Phase != want || st.Available {
		t.Fatalf("n1 alone: phase %q (available %v), want %q", st.Phase, st.Available, want)
	}
	for _, id := range ids[1:] {
		procs[id] = startNode(t, bin, id, nodes[id])
	}
	formed := waitLockable(t, bin, procs, ids, api, 30*time.Second)
	if !strings.Contains(procs["n1"].out.String(), "bootstrapping: waiting for n2, n3 in gossip") {
		t.Errorf("n1 did not log its bootstrap wait:\n%s", procs["n1"].out)
	}
	e0 := agreedEpoch(t, bin, ids, api)
	t.Logf("README recipe: formed epoch %d, every key lockable through every node %v after n2 and n3 started (%v in all)",
		e0, formed.Round(time.Millisecond), time.Since(begin).Round(time.Millisecond))

	// A second process under n1's ID with a fresh data directory.
	before, err := statusOf(bin, api("n1"))
	if err != nil {
		t.Fatal(err)
	}
	imp := startNode(t, bin, "n1-impostor", []string{"node", "--id", "n1", "--data-dir", filepath.Join(dir, "impostor"),
		"--grpc-addr", freeLoopback(t), "--gossip-addr", freeLoopback(t), "--api-addr", freeLoopback(t),
		"--join", flagValue(nodes["n2"], "--gossip-addr")})
	procs["n1-impostor"] = imp
	select {
	case err := <-imp.done:
		imp.done <- err
		if err == nil || !strings.Contains(imp.out.String(), homelock.ErrDuplicateNodeID.Error()) {
			t.Fatalf("impostor exited with %v, want %q:\n%s", err, homelock.ErrDuplicateNodeID, imp.out)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the impostor still runs after 30s:\n%s", imp.out)
	}
	after, err := statusOf(bin, api("n1"))
	if err != nil {
		t.Fatal(err)
	}
	if !after.Available || after.Epoch != before.Epoch || !hasMember(after, "n1", before.StoreID) {
		t.Fatalf("the real n1 after the impostor: available %v (%s), epoch %d (was %d), members %+v",
			after.Available, after.Reason, after.Epoch, before.Epoch, after.Members)
	}
	t.Logf("duplicate ID: refused (%s), n1 keeps epoch %d", lastLine(imp.out.String()), after.Epoch)

	// Kill two of three and restart them as the help says: same addresses,
	// no --bootstrap, no --initial, no --join.
	e1 := agreedEpoch(t, bin, ids, api)
	for _, id := range []string{"n2", "n3"} {
		_ = procs[id].cmd.Process.Kill()
		<-procs[id].done
		procs[id].done <- nil
	}
	for _, id := range []string{"n2", "n3"} {
		procs[id] = startNode(t, bin, id, withoutBootstrap(nodes[id]))
	}
	d := defaultsBound()
	took := waitLockable(t, bin, procs, ids, api, d)
	e2 := agreedEpoch(t, bin, ids, api)
	t.Logf("kill -9 n2 and n3, restart without --join: every key lockable through every node %v after the restart (bound %v), epochs %d -> %d",
		took.Round(time.Millisecond), d, e1, e2)
	if e2-e1 > 4 {
		t.Errorf("epochs grew by %d for two restarted nodes, bound 4", e2-e1)
	}

	// Cut n3 off: stopped, it answers neither gossip nor the transport.
	cut := *membershipCut
	if err := procs["n3"].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(cut)
	if err := procs["n3"].cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	took = waitLockable(t, bin, procs, ids, api, d)
	e3 := agreedEpoch(t, bin, ids, api)
	t.Logf("n3 stopped %v (DownAfter %v): healed, every key lockable through every node %v after SIGCONT (bound %v), epochs %d -> %d",
		cut, homelock.DefaultConfig().DownAfter, took.Round(time.Millisecond), d, e2, e3)
	if e3-e2 > 2 {
		t.Errorf("epochs grew by %d for one healed cut, bound 2", e3-e2)
	}

	// SIGTERM starts n1's controlled close, which lingers --epoch-lease
	// answering its keys' new homes; a second SIGTERM ends it at once.
	n1 := procs["n1"]
	if err := n1.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "n1 to hand off and linger", func() bool {
		return strings.Contains(n1.out.String(), "close: answering drain queries")
	})
	second := time.Now()
	if err := n1.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-n1.done:
		n1.done <- err
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
			t.Fatalf("n1 after a second SIGTERM: %v, want killed by SIGTERM", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatalf("n1 still runs 3s after a second SIGTERM:\n%s", n1.out)
	}
	t.Logf("second SIGTERM during n1's close: stopped in %v", time.Since(second).Round(time.Millisecond))
	took = waitLockable(t, bin, procs, ids[1:], api, d)
	t.Logf("n2 and n3 lock every key %v after n1 stopped (bound %v)", took.Round(time.Millisecond), d)
	moved := keyHomedAt("n1", "member")
	if out, err := exec.Command(bin, "lock", moved, "--node", api("n2"), "--wait", d.String(), "--", "true").CombinedOutput(); err != nil {
		t.Fatalf("%s, homed at n1 before, through n2: %v\n%s", moved, err, out)
	}

	// n1 started again as the help says: it left, so it joins once its
	// restart gate has passed.
	procs["n1"] = startNode(t, bin, "n1", withoutBootstrap(nodes["n1"]))
	took = waitLockable(t, bin, procs, ids, api, d)
	t.Logf("n1 started again after its close: every key lockable through every node %v after (bound %v)", took.Round(time.Millisecond), d)

	// The whole cluster at once: killed (a power cut), then stopped with
	// SIGTERM (a maintenance window), each time started again as the help
	// says. Every key locks again through every node, with a token above
	// every one granted before.
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		before := tokensOf(t, bin, ids, api)
		for _, id := range ids {
			if err := procs[id].cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
		}
		stopped := time.Now()
		for _, id := range ids {
			p := procs[id]
			select {
			case err := <-p.done:
				p.done <- err
				if sig == syscall.SIGTERM && err != nil {
					t.Fatalf("%s after SIGTERM with every node stopping: %v, want exit status 0\n%s", id, err, p.out)
				}
			case <-time.After(d):
				t.Fatalf("%s still runs %v after %v to every node\n%s", id, d, sig, p.out)
			}
		}
		down := time.Since(stopped)
		for _, id := range ids {
			procs[id] = startNode(t, bin, id, withoutBootstrap(nodes[id]))
		}
		took := waitLockable(t, bin, procs, ids, api, d)
		after := tokensOf(t, bin, ids, api)
		for _, home := range ids {
			if !before[home].Less(after[home]) {
				t.Errorf("%s (homed at %s): token %s after %v to every node and a restart, not above %s before",
					keyHomedAt(home, "member"), home, after[home], sig, before[home])
			}
		}
		t.Logf("%v to every node: all stopped in %v; started again, every key lockable through every node %v after (bound %v), tokens %v -> %v",
			sig, down.Round(time.Millisecond), took.Round(time.Millisecond), d, before, after)
	}
}

// tokensOf locks each node's key (keyHomedAt(id, "member")) through the
// first node and returns the fencing tokens its command saw.
func tokensOf(t *testing.T, bin string, ids []string, api func(string) string) map[string]fence.Token {
	t.Helper()
	toks := map[string]fence.Token{}
	for _, home := range ids {
		key := keyHomedAt(home, "member")
		tok, _, err := lockToken(bin, api(ids[0]), key, 5*time.Second)
		if err != nil {
			t.Fatalf("lock %s through %s: %v", key, ids[0], err)
		}
		toks[home] = tok
	}
	return toks
}

// defaultsBound is the time-to-lockable bound for the README's timings:
// DownAfter + EpochLease + Skew, and a few seconds for gossip and agreement.
func defaultsBound() time.Duration {
	c := homelock.DefaultConfig()
	return c.DownAfter + c.EpochLease + c.Skew + 10*time.Second
}

// readmeRecipe returns the README's three-node recipe, per node ID, as
// arguments for the homelock binary: shell variables expanded, each
// 127.0.0.1 port mapped to a free one, /tmp/ mapped into dir.
func readmeRecipe(t *testing.T, dir string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "A three-node cluster on one machine")
	if !ok {
		t.Fatal("README.md has no three-node recipe")
	}
	_, rest, _ = strings.Cut(rest, "```sh\n")
	block, _, _ := strings.Cut(rest, "```")
	vars := map[string]string{}
	ports := map[string]string{}
	port := regexp.MustCompile(`127\.0\.0\.1:\d+`)
	out := map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(block))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		line = port.ReplaceAllStringFunc(line, func(p string) string {
			if ports[p] == "" {
				ports[p] = freeLoopback(t)
			}
			return ports[p]
		})
		line = strings.ReplaceAll(line, "/tmp/", dir+"/")
		if k, v, ok := strings.Cut(line, "="); ok && !strings.ContainsAny(k, " $") {
			vars[k] = v
			continue
		}
		fields := strings.Fields(strings.TrimSuffix(line, "&"))
		if len(fields) < 2 || fields[0] != "homelock" || fields[1] != "node" {
			continue
		}
		for i, f := range fields {
			fields[i] = os.Expand(f, func(k string) string { return vars[k] })
		}
		out[flagValue(fields[1:], "--id")] = fields[1:]
	}
	if len(out) != 3 {
		t.Fatalf("README recipe: %d node commands, want 3:\n%s", len(out), block)
	}
	return out
}

func flagValue(args []string, name string) string {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// withoutBootstrap drops --bootstrap and --initial: a restart as the help
// says.
func withoutBootstrap(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "--bootstrap":
		case "--initial":
			i++
		default:
			out = append(out, args[i])
		}
	}
	return out
}

// mproc is one `homelock node` process whose output is read while it runs.
type mproc struct {
	id   string
	cmd  *exec.Cmd
	out  *lockedBuf
	done chan error
}

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func startNode(t *testing.T, bin, name string, args []string) *mproc {
	t.Helper()
	p := &mproc{id: name, out: &lockedBuf{}, done: make(chan error, 1)}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := dieWithTest(p.cmd).Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	return p
}

// stopProcs ends every process still running: SIGCONT (a stopped one), then
// SIGTERM, then SIGKILL after 15s.
func stopProcs(t *testing.T, procs map[string]*mproc) {
	for _, p := range procs {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range procs {
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
			t.Errorf("%s did not stop on SIGTERM within 15s", p.id)
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", p.id, p.out)
		}
	}
}

func statusOf(bin, api string) (clientapi.StatusReport, error) {
	out, err := exec.Command(bin, "status", "--node", api, "--json", "--timeout", "2s").Output()
	if err != nil {
		return clientapi.StatusReport{}, fmt.Errorf("status %s: %v", api, err)
	}
	var r clientapi.Report
	if err := json.Unmarshal(out, &r); err != nil {
		return clientapi.StatusReport{}, err
	}
	return r.Status, nil
}

func hasMember(st clientapi.StatusReport, id string, store string) bool {
	for _, m := range st.Members {
		if m.ID == id && m.StoreID == store {
			return true
		}
	}
	return false
}

// waitLockable waits until a key homed at each of ids locks through each of
// ids, and returns how long that took.
func waitLockable(t *testing.T, bin string, procs map[string]*mproc, ids []string, api func(string) string, d time.Duration) time.Duration {
	t.Helper()
	begin := time.Now()
	for time.Since(begin) < d {
		ok := true
		for _, via := range ids {
			for _, home := range ids {
				key := keyHomedAt(home, "member")
				if err := exec.Command(bin, "lock", key, "--node", api(via), "--wait", "1s", "--", "true").Run(); err != nil {
					ok = false
					break
				}
			}
			if !ok {
				break
			}
		}
		if ok {
			return time.Since(begin)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, id := range ids {
		st, err := statusOf(bin, api(id))
		t.Logf("%s: %+v %v", id, st, err)
	}
	t.Fatalf("keys not lockable through every node within %v", d)
	return 0
}

// agreedEpoch is the epoch every node reports; it fails the test if they
// differ for 10s.
func agreedEpoch(t *testing.T, bin string, ids []string, api func(string) string) uint64 {
	t.Helper()
	var got []uint64
	deadline := time.Now().Add(10 * time.Second)
	for {
		got = got[:0]
		for _, id := range ids {
			st, err := statusOf(bin, api(id))
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, st.Epoch)
		}
		if got[0] == got[1] && got[1] == got[2] {
			return got[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("nodes report epochs %v", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
