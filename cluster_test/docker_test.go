//go:build docker

// Multi-host tests: three `homelock node` containers, each with its own
// address on a private Docker network, cut off with `docker network
// disconnect` and brought back. They need a Docker engine and run only with
// the docker build tag:
//
//	go test -tags docker ./cluster_test -run TestDocker -v
//
// The image is built FROM scratch around a static build of cmd/homelock, so
// no registry is needed.
package clustertest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homelock/homelock/clientapi"
	"github.com/homelock/homelock/fence"
)

// dockerCluster is three node containers on one network.
type dockerCluster struct {
	t       *testing.T
	bin     string // homelock built for this host (lock, status)
	net     string
	names   []string // container names, n1..n3
	ips     []string
	started time.Time
}

func docker(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func startDockerCluster(t *testing.T) *dockerCluster {
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("no docker command")
	}
	if err := exec.Command("docker", "info").Run(); err != nil {
		t.Skip("no Docker engine")
	}
	dir := t.TempDir()
	static := filepath.Join(dir, "image")
	if err := os.MkdirAll(static, 0o755); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", filepath.Join(static, "homelock"), "github.com/homelock/homelock/cmd/homelock")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("static build: %v\n%s", err, out)
	}
	dockerfile := "FROM scratch\nCOPY homelock /homelock\nENTRYPOINT [\"/homelock\"]\n"
	if err := os.WriteFile(filepath.Join(static, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		t.Fatal(err)
	}
	suffix := fmt.Sprintf("%x", rand.Uint32())
	image := "homelock-test:" + suffix
	docker(t, "build", "-q", "-t", image, static)
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", image).Run() })

	c := &dockerCluster{t: t, bin: buildHomelock(t, dir), net: "hl-" + suffix}
	third := 16 + rand.IntN(200)
	docker(t, "network", "create", "--subnet", fmt.Sprintf("172.30.%d.0/24", third), c.net)
	t.Cleanup(func() { _ = exec.Command("docker", "network", "rm", c.net).Run() })
	ids := []string{"n1", "n2", "n3"}
	for i := range ids {
		c.ips = append(c.ips, fmt.Sprintf("172.30.%d.%d", third, 11+i))
		c.names = append(c.names, "hl-"+suffix+"-"+ids[i])
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range c.names {
				out, _ := exec.Command("docker", "logs", "--tail", "30", n).CombinedOutput()
				t.Logf("logs of %s:\n%s", n, out)
			}
		}
		for _, n := range c.names {
			_ = exec.Command("docker", "rm", "-f", n).Run()
		}
	})
	for i, id := range ids {
		var join []string
		for j, ip := range c.ips {
			if j != i {
				join = append(join, ip+":7947")
			}
		}
		docker(t, "run", "-d", "--name", c.names[i], "--network", c.net, "--ip", c.ips[i], image, "node",
			"--id", id, "--cluster", "docker", "--data-dir", "/data",
			"--bootstrap", "--initial", strings.Join(ids, ","), "--join", strings.Join(join, ","),
			"--grpc-addr", c.ips[i]+":7946", "--gossip-addr", c.ips[i]+":7947", "--api-addr", c.ips[i]+":7950",
			"--epoch-lease", "2s", "--max-lease", "800ms", "--down-after", "2s")
	}
	for i := range ids {
		waitFor(t, 60*time.Second, ids[i]+" available", func() bool { return c.status(i).Status.Available })
	}
	c.started = time.Now()
	return c
}

func (c *dockerCluster) api(i int) string { return c.ips[i] + ":7950" }

// status asks node i's client API (a zero Report if it does not answer).
func (c *dockerCluster) status(i int) clientapi.Report {
	var r clientapi.Report
	out, err := exec.Command(c.bin, "status", "--node", c.api(i), "--json").Output()
	if err == nil {
		_ = json.Unmarshal(out, &r)
	}
	return r
}

func (c *dockerCluster) members(i int) []string {
	var ids []string
	for _, m := range c.status(i).Status.Members {
		ids = append(ids, m.ID)
	}
	return ids
}

// lockToken runs `homelock lock key -- sh -c 'echo $HOMELOCK_TOKEN'` through
// node i and returns the token it printed.
func (c *dockerCluster) lockToken(i int, key string, wait time.Duration) (fence.Token, error) {
	out, err := exec.Command(c.bin, "lock", key, "--node", c.api(i), "--wait", wait.String(), "--",
		"sh", "-c", `echo "$HOMELOCK_TOKEN"`).CombinedOutput()
	if err != nil {
		return fence.Token{}, fmt.Errorf("%v: %s", err, out)
	}
	return fence.ParseToken(strings.TrimSpace(string(out)))
}

// A node cut off from the network by `docker network disconnect`:
//   - the command `homelock lock` runs under a key delegated to it is stopped
//     before a locker elsewhere gets that key (its lease ran out, on the
//     lock command's clock and the home's);
//   - the keys it was home for get a new home once it is agreed down, with
//     tokens above every earlier one;
//   - reconnected, it joins again and grants again.
func TestDockerPartitionAndRejoin(t *testing.T) {
	c := startDockerCluster(t)
	dir := t.TempDir()
	held := keyHomedAt("n2", "held")
	homed := keyHomedAt("n1", "homed")
	before, err := c.lockToken(1, homed, 10*time.Second)
	if err != nil {
		t.Fatalf("lock %s before the cut: %v", homed, err)
	}

	// A command holds `held` through n1 when n1 is cut off.
	first := startLockedCommand(t, c.bin, dir, held, c.api(0))
	docker(t, "network", "disconnect", c.net, c.names[0])
	cut := time.Now()
	heldAt, _ := first.thenLockedThrough(t, c.bin, held, c.api(1), 30*time.Second)

	after, err := c.lockToken(1, homed, 60*time.Second)
	if err != nil {
		t.Fatalf("lock %s (home n1, cut off) on n2: %v", homed, err)
	}
	rehomed := time.Since(cut)
	if ms := c.members(1); slices.Contains(ms, "n1") {
		t.Fatalf("n1 still a member after its keys moved: %v", ms)
	}
	if !before.Less(after) {
		t.Fatalf("token %s after the move, %s before it", after, before)
	}

	docker(t, "network", "connect", "--ip", c.ips[0], c.net, c.names[0])
	back := time.Now()
	waitFor(t, 90*time.Second, "n1 to be a member again", func() bool {
		return slices.Contains(c.members(1), "n1") && c.status(0).Status.Available
	})
	rejoined := time.Since(back)
	again, err := c.lockToken(0, homed, 30*time.Second)
	if err != nil {
		t.Fatalf("lock %s through n1 after it rejoined: %v", homed, err)
	}
	if !after.Less(again) {
		t.Fatalf("token %s after the rejoin, %s before it", again, after)
	}
	t.Logf("n1 cut off: its command stopped and n2 got %s %v later; %s (home n1) granted by a new home %v after the cut (%s -> %s); n1 a member again %v after reconnecting, token %s",
		held, heldAt.Round(time.Millisecond), homed, rehomed.Round(time.Millisecond), before, after, rejoined.Round(time.Millisecond), again)
}
