package clustertest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/homelock/homelock/fence"
)

// stamp is a shell command writing the time in nanoseconds to file.
func stamp(file string) string { return fmt.Sprintf("date +%%s%%N > %q", file) }

func readStamp(t *testing.T, file string) time.Time {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return time.Unix(0, ns)
}

// TestProcessesHeldWhileAlive runs `homelock lock` against three node
// processes with the default leases (2s), as a user would:
//   - a 10s critical section on n1 keeps its lock while a locker on n2
//     waits, and n2 gets the key right after it ends;
//   - a section started 0.2s after another ended on the same idle node is
//     not killed when the idle delegation's first lease would have run out;
//   - two sections one after the other through one node get distinct,
//     increasing HOMELOCK_TOKENs.
func TestProcessesHeldWhileAlive(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the homelock command (-short)")
	}
	dir := t.TempDir()
	bin := buildHomelock(t, dir)
	procs := startProcessCluster(t, bin, dir, "heldalive") // the default leases, as a user runs it
	lock := func(key string, p *hlProc, script string, extra ...string) *exec.Cmd {
		args := append([]string{"lock", key, "--node", p.api}, extra...)
		return exec.Command(bin, append(args, "--", "sh", "-c", script)...)
	}

	t.Run("long section while another node waits", func(t *testing.T) {
		key := keyHomedAt("n3", "long")
		begin, end, got := filepath.Join(dir, "long-begin"), filepath.Join(dir, "long-end"), filepath.Join(dir, "long-got")
		first := lock(key, procs[0], stamp(begin)+"; sleep 10; "+stamp(end))
		var firstOut bytes.Buffer
		first.Stdout, first.Stderr = &firstOut, &firstOut
		if err := dieWithTest(first).Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 20*time.Second, "the first section to start", func() bool { _, err := os.Stat(begin); return err == nil })
		time.Sleep(500 * time.Millisecond)
		asked := time.Now()
		out, err := lock(key, procs[1], stamp(got), "--wait", "30s").CombinedOutput()
		if err != nil {
			t.Fatalf("the waiting locker on n2: %v\n%s", err, out)
		}
		if err := first.Wait(); err != nil {
			t.Fatalf("the 10s section on n1 lost its lock while n2 waited: %v\n%s", err, firstOut.String())
		}
		b, e, g := readStamp(t, begin), readStamp(t, end), readStamp(t, got)
		if e.Sub(b) < 10*time.Second || g.Before(e) {
			t.Fatalf("section %v..%v (%v), n2's began at %v", b, e, e.Sub(b), g)
		}
		t.Logf("10s section held to the end while n2 waited; n2 asked→granted %v, section end→n2 granted %v",
			g.Sub(asked).Round(time.Millisecond), g.Sub(e).Round(time.Millisecond))
	})

	t.Run("repeat on an idle node after 0.2s", func(t *testing.T) {
		key := keyHomedAt("n2", "repeat")
		if out, err := lock(key, procs[0], "sleep 3").CombinedOutput(); err != nil {
			t.Fatalf("first section: %v\n%s", err, out)
		}
		time.Sleep(200 * time.Millisecond)
		if out, err := lock(key, procs[0], "sleep 3.5").CombinedOutput(); err != nil {
			t.Fatalf("the second section, 0.2s after the first, lost its lock: %v\n%s", err, out)
		}
	})

	t.Run("a token per section", func(t *testing.T) {
		key := keyHomedAt("n2", "tokens")
		var toks []fence.Token
		for range 2 {
			out, err := lock(key, procs[0], `echo "$HOMELOCK_TOKEN"`).CombinedOutput()
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			tok, err := fence.ParseToken(strings.TrimSpace(string(out)))
			if err != nil {
				t.Fatal(err)
			}
			toks = append(toks, tok)
		}
		if !toks[0].Less(toks[1]) {
			t.Fatalf("two sections through n1 got tokens %s then %s: not distinct and increasing", toks[0], toks[1])
		}
		t.Logf("tokens %s then %s", toks[0], toks[1])
	})
}
