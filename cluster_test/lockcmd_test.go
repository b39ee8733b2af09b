package clustertest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homelock/homelock/epoch"
	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/msg"
)

// keyHomedAt is a key whose home is id while n1, n2 and n3 are the members.
func keyHomedAt(id, prefix string) string { return keyHomedAmong(3, id, prefix) }

// keyHomedAmong is keyHomedAt in a cluster of members n1..nN.
func keyHomedAmong(n int, id, prefix string) string {
	var members []msg.Member
	for i := 1; i <= n; i++ {
		members = append(members, msg.Member{ID: msg.NodeID(fmt.Sprintf("n%d", i)), Version: 1})
	}
	ring := epoch.NewRing(msg.Epoch{Members: members})
	for i := 0; ; i++ {
		k := fmt.Sprintf("%s-%d", prefix, i)
		if h, _ := ring.Home(k); string(h.ID) == id {
			return k
		}
	}
}

// lockToken locks key with `bin lock --node nodes` (a comma-separated
// list) and returns the fencing token its command saw and what the lock
// command said on stderr.
func lockToken(bin, nodes, key string, wait time.Duration) (fence.Token, string, error) {
	cmd := exec.Command(bin, "lock", key, "--node", nodes, "--wait", wait.String(), "--",
		"sh", "-c", `echo "$HOMELOCK_TOKEN"`)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fence.Token{}, stderr.String(), fmt.Errorf("%v: %s%s", err, out, stderr.String())
	}
	tok, err := fence.ParseToken(strings.TrimSpace(string(out)))
	return tok, stderr.String(), err
}

// lockedCommand is `homelock lock KEY -- sh -c '...; exec sleep 120'` run
// through one node: a critical section that lasts until the lock command
// stops it.
type lockedCommand struct {
	cmd *exec.Cmd
	out syncBuffer // read, when a check fails, while the command may still run
	// stopped is a file written the moment the lock command has exited.
	stopped string
	done    chan error
}

// startLockedCommand starts it and returns once its command runs.
func startLockedCommand(t *testing.T, bin, dir, key, api string) *lockedCommand {
	t.Helper()
	started := filepath.Join(dir, key+"-started")
	lc := &lockedCommand{stopped: filepath.Join(dir, key+"-stopped"), done: make(chan error, 1)}
	lc.cmd = exec.Command(bin, "lock", key, "--node", api, "--kill-after", "1s", "--",
		"sh", "-c", fmt.Sprintf("touch %q; exec sleep 120", started))
	lc.cmd.Stdout, lc.cmd.Stderr = &lc.out, &lc.out
	if err := dieWithTest(lc.cmd).Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := lc.cmd.Wait()
		_ = os.WriteFile(lc.stopped, nil, 0o644) // before anything else can lock the key
		lc.done <- err
	}()
	t.Cleanup(func() { _ = lc.cmd.Process.Kill() })
	waitFor(t, 30*time.Second, "the command to run under the lock", func() bool {
		_, err := os.Stat(started)
		return err == nil
	})
	return lc
}

// thenLockedThrough takes the same key through another node (api) and fails
// the test unless that critical section began after this lock command had
// exited, and this one exited with an error (its lock lost). It returns
// how long the second lock took and what this lock command printed.
func (lc *lockedCommand) thenLockedThrough(t *testing.T, bin, key, api string, wait time.Duration) (time.Duration, string) {
	t.Helper()
	start := time.Now()
	out, err := exec.Command(bin, "lock", key, "--node", api, "--wait", wait.String(), "--",
		"sh", "-c", fmt.Sprintf("if [ -e %q ]; then echo after; else echo OVERLAP; fi", lc.stopped)).CombinedOutput()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("second lock of %s: %v\n%s", key, err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "after" {
		t.Fatalf("the second critical section on %s began while the first command still ran (%q)\nfirst: %s", key, got, lc.out.String())
	}
	select {
	case err := <-lc.done:
		if err == nil {
			t.Fatalf("the first lock command exited 0 though its lock was lost\n%s", lc.out.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the first lock command never stopped its command\n%s", lc.out.String())
	}
	return took, lc.out.String()
}
