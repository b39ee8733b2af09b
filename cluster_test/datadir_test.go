package clustertest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The data directory's failure modes, on real `homelock node` processes:
// a second node on a directory in use exits at once naming the first one's
// pid; a node whose WAL lost synced writes exits refusing the directory
// (and keeps refusing) instead of starting with older state.
func TestProcessDataDir(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the homelock command (-short)")
	}
	dir := t.TempDir()
	bin := buildHomelock(t, dir)
	data := filepath.Join(dir, "n1")
	node := func() *exec.Cmd {
		return exec.Command(bin, "node", "--id", "n1", "--cluster", "dirtest", "--data-dir", data,
			"--bootstrap", "--initial", "n1", "--grpc-addr", freeLoopback(t), "--gossip-addr", freeLoopback(t),
			"--api-addr", freeLoopback(t), "--epoch-lease", "2s", "--max-lease", "800ms")
	}

	first := node()
	// Read while the node runs: exec's copier writes it meanwhile.
	var out syncBuffer
	first.Stdout, first.Stderr = &out, &out
	if err := dieWithTest(first).Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- first.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = first.Process.Kill()
			<-done
		}
	})
	waitFor(t, 20*time.Second, "the first node to start", func() bool {
		select {
		case err := <-done:
			stopped = true
			t.Fatalf("first node exited: %v\n%s", err, out.String())
		default:
		}
		_, err := os.Stat(filepath.Join(data, "HOMELOCK-COUNTER"))
		return err == nil && strings.Contains(out.String(), "client API on")
	})

	second, err := node().CombinedOutput()
	if err == nil {
		t.Fatalf("a second node on the same data dir started:\n%s", second)
	}
	want := fmt.Sprintf("data dir %q is in use by another homelock node (pid %d)", data, first.Process.Pid)
	if !strings.Contains(string(second), want) {
		t.Fatalf("second node's output lacks %q:\n%s", want, second)
	}

	// SIGHUP (its terminal closed) is a controlled Close, as SIGTERM is
	// (membership_process_test.go), not a crash.
	if err := first.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		stopped = true
		if err != nil || !strings.Contains(out.String(), "shutting down") {
			t.Fatalf("first node did not close cleanly on SIGHUP: %v\n%s", err, out.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("first node did not stop on SIGHUP\n%s", out.String())
	}

	names, err := filepath.Glob(filepath.Join(data, "*.log"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no WAL in %s (%v)", data, err)
	}
	slices.Sort(names)
	wal := names[len(names)-1]
	b, err := os.ReadFile(wal)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(wal, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		refused, err := node().CombinedOutput()
		if err == nil {
			t.Fatalf("a node whose WAL was cut in half started:\n%s", refused)
		}
		for _, part := range []string{"durable state is corrupt", "lost synced writes", "restore the directory", "new member"} {
			if !strings.Contains(string(refused), part) {
				t.Fatalf("refusal lacks %q:\n%s", part, refused)
			}
		}
	}
}
