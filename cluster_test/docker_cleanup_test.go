//go:build docker

package clustertest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// dockerLabel marks what a Docker test makes (its image, network and
// containers, and as a comment its iptables rules) with the PID of the test
// process. An interrupted test removes its own (undoOnSignal); a test
// process killed outright leaves them, and the next Docker test removes
// what a process no longer running left (sweepDockerLeftovers), as the
// harness sweeps its dead work directories.
const dockerLabel = "homelock-test-pid"

func dockerLabelArg() string { return fmt.Sprintf("%s=%d", dockerLabel, os.Getpid()) }

// undo is what a Docker test must remove however it ends, last made first
// undone, run once: by the test's cleanup, or on SIGINT or SIGTERM.
type undo struct {
	mu   sync.Mutex
	fns  []func()
	done bool
}

func (u *undo) add(f func()) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.fns = append(u.fns, f)
}

func (u *undo) run() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.done {
		return
	}
	u.done = true
	for i := len(u.fns) - 1; i >= 0; i-- {
		u.fns[i]()
	}
}

// undoOnSignal runs u when the test process gets SIGINT or SIGTERM, and
// exits: the test's own cleanups would never run, and its containers
// would go on running. It stops listening when the test ends.
func undoOnSignal(t *testing.T, u *undo) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case s := <-sigs:
			u.run()
			fmt.Fprintf(os.Stderr, "%s: %v: removed its containers, network, image, iptables rules and temp dirs\n", t.Name(), s)
			os.Exit(128 + int(s.(syscall.Signal)))
		case <-stop:
		}
	}()
	t.Cleanup(func() {
		signal.Stop(sigs)
		close(stop)
		<-stopped
	})
}

// sweepDockerLeftovers removes the containers, networks, images and
// iptables rules that a Docker test process no longer running left behind.
func sweepDockerLeftovers(t *testing.T) {
	dead := func(label string) bool {
		pid, err := strconv.Atoi(label)
		if err != nil || pid <= 0 {
			return false
		}
		err = syscall.Kill(pid, 0)
		return errors.Is(err, syscall.ESRCH)
	}
	list := func(args ...string) [][2]string {
		out, err := exec.Command("docker", args...).Output()
		if err != nil {
			return nil
		}
		var rows [][2]string
		for _, line := range strings.Fields(string(out)) {
			id, label, _ := strings.Cut(line, "=") // label absent: ""
			rows = append(rows, [2]string{id, label})
		}
		return rows
	}
	filter := "label=" + dockerLabel
	labelFmt := fmt.Sprintf(`{{.ID}}={{.Label %q}}`, dockerLabel)
	for _, r := range list("ps", "-a", "--filter", filter, "--format", labelFmt) {
		if dead(r[1]) {
			t.Logf("removing container %s left by test process %s", r[0], r[1])
			_ = exec.Command("docker", "rm", "-f", r[0]).Run()
		}
	}
	for _, r := range list("network", "ls", "--filter", filter, "--format", labelFmt) {
		if dead(r[1]) {
			t.Logf("removing network %s left by test process %s", r[0], r[1])
			_ = exec.Command("docker", "network", "rm", r[0]).Run()
		}
	}
	for _, r := range list("images", "--filter", filter, "--format", "{{.ID}}") {
		out, err := exec.Command("docker", "image", "inspect", "--format", fmt.Sprintf(`{{index .Config.Labels %q}}`, dockerLabel), r[0]).Output()
		if err == nil && dead(strings.TrimSpace(string(out))) {
			t.Logf("removing image %s left by a test process", r[0])
			_ = exec.Command("docker", "rmi", "-f", r[0]).Run()
		}
	}
	out, err := exec.Command("iptables", "-S", "DOCKER-USER").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		// iptables -S quotes the comment; the rule is given back unquoted.
		f := strings.Fields(strings.ReplaceAll(line, `"`, ""))
		i := slices.Index(f, "--comment")
		if len(f) == 0 || f[0] != "-A" || i < 0 || i+1 == len(f) {
			continue
		}
		if v, ok := strings.CutPrefix(f[i+1], dockerLabel+"="); ok && dead(v) {
			t.Logf("removing iptables rule %q left by test process %s", line, v)
			f[0] = "-D"
			_ = exec.Command("iptables", f...).Run()
		}
	}
}
