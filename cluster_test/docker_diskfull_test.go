//go:build docker

package clustertest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A node's data disk fills up (docs/operations.md, "A full disk"):
//   - running, the node goes on granting: it writes its data directory only
//     when the membership changes, into a write-ahead log Pebble has already
//     allocated;
//   - stopped and started again on the full disk, it refuses at once, with
//     exit status 1 and a message that says to free space, rather than
//     retrying in a loop;
//   - meanwhile the other nodes lock its keys, with tokens above every one
//     before;
//   - with space freed and started again, it is a member again: every node
//     locks a key of every home within healBound.
func TestDockerDiskFull(t *testing.T) {
	c := startDockerClusterN(t, 3, 0)
	key := keyHomedAt("n1", "disk")
	before, err := c.lockToken(0, key, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	filled := fillDisk(t, c.disks[0])
	running, err := c.lockToken(0, key, 5*time.Second)
	if err != nil {
		t.Fatalf("n1 on a full disk (%d bytes written to fill it), still running, did not grant %s: %v", filled, key, err)
	}
	if !before.Less(running) {
		t.Fatalf("%s on the full disk: token %s, not above %s before", key, running, before)
	}

	docker(t, "stop", c.names[0])
	start := time.Now()
	docker(t, "start", c.names[0])
	code := c.waitExited(t, 0, 30*time.Second)
	refused := time.Since(start)
	logs, _ := exec.Command("docker", "logs", "--tail", "3", c.names[0]).CombinedOutput()
	if code != 1 || !strings.Contains(string(logs), "not enough free disk space") || !strings.Contains(string(logs), "free space and start again") {
		t.Fatalf("n1 started on a full disk exited %d after %v; want 1 and a message to free space:\n%s", code, refused, logs)
	}

	var moved string
	waitFor(t, healBound, "n2 to lock n1's key while n1 is down", func() bool {
		tok, err := c.lockToken(1, key, time.Second)
		if err == nil && !running.Less(tok) {
			t.Fatalf("%s through n2 after n1 stopped: token %s, not above %s", key, tok, running)
		}
		moved = tok.String()
		return err == nil
	})

	if err := os.Remove(filepath.Join(c.disks[0], "filler")); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	docker(t, "start", c.names[0])
	took, ok := c.everyNodeLocksEveryHome(freed, func() bool { return false })
	if !ok {
		t.Fatalf("with space freed and n1 started again, not every node locked a key of every home within %v", healBound)
	}
	after, err := c.lockToken(0, key, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("full disk: n1 still granted (%s, after %s); restarted on it, exited %d in %v (%s); n2 locked its key (%s); space freed and started again, every node locked every home's key %v after (bound %v), %s through n1",
		running, before, code, refused.Round(time.Millisecond), lastLine(string(logs)), moved, took.Round(time.Millisecond), healBound, after)
}

// fillDisk writes a file named filler into dir until its file system is
// full, and returns how many bytes it took.
func fillDisk(t *testing.T, dir string) int64 {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	var n int64
	for {
		w, err := f.Write(chunk)
		n += int64(w)
		if errors.Is(err, syscall.ENOSPC) {
			return n
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// waitExited waits until node i's container has exited and returns its
// exit status.
func (c *dockerCluster) waitExited(t *testing.T, i int, bound time.Duration) int {
	t.Helper()
	var code int
	waitFor(t, bound, c.names[i]+" to exit", func() bool {
		out, err := exec.Command("docker", "inspect", "-f", "{{.State.Status}} {{.State.ExitCode}}", c.names[i]).Output()
		var status string
		if err == nil {
			_, err = fmt.Sscan(string(out), &status, &code)
		}
		return err == nil && status == "exited"
	})
	return code
}
