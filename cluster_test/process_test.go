package clustertest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/homelock/homelock/fence"
)

// hlProc is one `homelock node` process.
type hlProc struct {
	id   string
	api  string
	cmd  *exec.Cmd
	out  *bytes.Buffer
	done chan error
}

// buildHomelock builds the homelock command into dir.
func buildHomelock(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "homelock")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/homelock/homelock/cmd/homelock")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/homelock: %v\n%s", err, out)
	}
	return bin
}

// shortLeases makes a process cluster's leases and failure detection quick,
// for tests that wait them out.
var shortLeases = []string{"--epoch-lease", "2s", "--max-lease", "800ms", "--down-after", "2s"}

// startProcessCluster starts three `homelock node` processes (n1, n2, n3)
// on loopback as one cluster, each with flags added, and returns once each
// can grant; cleanup stops them with SIGTERM.
func startProcessCluster(t *testing.T, bin, dir, cluster string, flags ...string) []*hlProc {
	t.Helper()
	ids := []string{"n1", "n2", "n3"}
	gossip := make([]string, len(ids))
	for i := range ids {
		gossip[i] = freeLoopback(t)
	}
	procs := make([]*hlProc, len(ids))
	var wg sync.WaitGroup
	t.Cleanup(func() {
		for _, p := range procs {
			if p == nil {
				continue
			}
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
		for _, p := range procs {
			if p == nil {
				continue
			}
			select {
			case <-p.done:
			case <-time.After(10 * time.Second):
				_ = p.cmd.Process.Kill()
				<-p.done
				t.Errorf("node %s did not stop on SIGTERM within 10s", p.id)
			}
		}
		wg.Wait()
	})
	for i, id := range ids {
		p := &hlProc{id: id, api: freeLoopback(t), out: &bytes.Buffer{}, done: make(chan error, 1)}
		args := []string{"node",
			"--id", id, "--cluster", cluster, "--data-dir", filepath.Join(dir, id),
			"--bootstrap", "--initial", strings.Join(ids, ","),
			"--grpc-addr", freeLoopback(t), "--gossip-addr", gossip[i], "--api-addr", p.api,
		}
		args = append(args, flags...)
		var join []string
		for j, g := range gossip {
			if j != i {
				join = append(join, g)
			}
		}
		args = append(args, "--join", strings.Join(join, ","))
		p.cmd = exec.Command(bin, args...)
		p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
		if err := dieWithTest(p.cmd).Start(); err != nil {
			t.Fatalf("start node %s: %v", id, err)
		}
		procs[i] = p
		wg.Go(func() { p.done <- p.cmd.Wait() })
	}
	for _, p := range procs {
		waitFor(t, 30*time.Second, "node "+p.id+" to be available", func() bool {
			select {
			case err := <-p.done:
				p.done <- err
				t.Fatalf("node %s exited: %v\n%s", p.id, err, p.out)
			default:
			}
			out, err := exec.Command(bin, "status", "--node", p.api).CombinedOutput()
			return err == nil && bytes.Contains(out, []byte("cluster locks available: yes"))
		})
	}
	return procs
}

// Issue 3, real nodes 6: three `homelock node` processes on loopback; two
// loops of `homelock lock NAME -- sh -c ...` on different nodes run at once,
// each critical section appending a block of numbered lines (with its
// HOMELOCK_TOKEN) to one file. The file's blocks never interleave, every
// block is whole, and the tokens, in file order, never go back.
func TestProcessesLockFile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the homelock command (-short)")
	}
	dir := t.TempDir()
	begin := time.Now()
	bin := buildHomelock(t, dir)
	built := time.Since(begin)

	procs := startProcessCluster(t, bin, dir, "proctest", shortLeases...)

	up := time.Since(begin) - built
	begin = time.Now()
	const (
		rounds = 4
		lines  = 15
	)
	file := filepath.Join(dir, "shared.log")
	script := fmt.Sprintf(`i=1; while [ $i -le %d ]; do echo "$WHO $ROUND $i $HOMELOCK_TOKEN" >> %q; sleep 0.005; i=$((i+1)); done`, lines, file)
	var lockers sync.WaitGroup
	errs := make(chan error, 2*rounds)
	for _, p := range []*hlProc{procs[0], procs[1]} {
		lockers.Go(func() {
			for r := range rounds {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				cmd := exec.CommandContext(ctx, bin, "lock", "shared-file", "--node", p.api, "--wait", "20s", "--", "sh", "-c", script)
				cmd.Env = append(os.Environ(), "WHO="+p.id, "ROUND="+strconv.Itoa(r))
				out, err := cmd.CombinedOutput()
				cancel()
				if err != nil {
					errs <- fmt.Errorf("homelock lock on %s, round %d: %v\n%s", p.id, r, err, out)
				}
			}
		})
	}
	lockers.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type block struct{ who, round string }
	var (
		cur    block
		next   = 1
		blocks = 0
		last   fence.Token
		n      = 0
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		fs := strings.Fields(sc.Text())
		if len(fs) != 4 {
			t.Fatalf("line %d: %q", n, sc.Text())
		}
		b, i := block{fs[0], fs[1]}, fs[2]
		tok, err := fence.ParseToken(fs[3])
		if err != nil {
			t.Fatalf("line %d: token %q: %v", n, fs[3], err)
		}
		if next == 1 {
			cur, blocks = b, blocks+1
		} else if b != cur {
			t.Fatalf("line %d: %s round %s wrote inside the critical section of %s round %s (its line %d of %d)", n, b.who, b.round, cur.who, cur.round, next, lines)
		}
		if i != strconv.Itoa(next) {
			t.Fatalf("line %d: %s round %s line %s, want %d", n, b.who, b.round, i, next)
		}
		if tok.Less(last) {
			t.Fatalf("line %d: token %s after %s", n, tok, last)
		}
		last = tok
		if next++; next > lines {
			next = 1
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if blocks != 2*rounds || next != 1 {
		t.Fatalf("%d whole blocks (and %d lines of another), want %d", blocks, next-1, 2*rounds)
	}
	t.Logf("%d critical sections of %d lines from two nodes, none interleaved; last token %s (build %v, cluster up %v, locking %v)",
		blocks, lines, last, built.Round(time.Millisecond), up.Round(time.Millisecond), time.Since(begin).Round(time.Millisecond))

	pausedHolder(t, bin, dir, procs)
}

// pausedHolder: `homelock lock` holds a key through n1, and n1's process is
// stopped (SIGSTOP: transport and timers frozen, so it sends nothing, not
// even LOST). The lock command must stop its command on its own clock, and
// it must have done so before a locker on n2 (the key's home) gets the key.
func pausedHolder(t *testing.T, bin, dir string, procs []*hlProc) {
	key := keyHomedAt("n2", "paused")
	first := startLockedCommand(t, bin, dir, key, procs[0].api)
	n1 := procs[0].cmd.Process
	if err := n1.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = n1.Signal(syscall.SIGCONT) }()
	took, out := first.thenLockedThrough(t, bin, key, procs[1].api, 20*time.Second)
	if !strings.Contains(out, "no word from the node") {
		t.Fatalf("the lock command on paused n1 stopped for another reason:\n%s", out)
	}
	t.Logf("n1 paused: its lock command stopped its command on its own clock; n2's locker got %s %v after the pause", key, took.Round(time.Millisecond))
}
