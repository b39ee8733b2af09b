//go:build docker

package clustertest

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	chaosDuration = flag.Duration("chaos.duration", 90*time.Second, "how long TestDockerChaos injects faults")
	chaosSeed     = flag.Uint64("chaos.seed", 0, "TestDockerChaos's fault schedule (0: a new one)")
	chaosNodes    = flag.Int("chaos.nodes", 3, "TestDockerChaos's node containers (3 to 9)")
	chaosRecord   = flag.String("chaos.record", "", "write every lock command and fault step of TestDockerChaos to this file, as JSON lines")
)

// The chaos run: node containers (three, or -chaos.nodes) under load from
// `homelock lock` on the host while faults come one after another,
// sometimes two at once on different nodes: a node paused (`docker
// pause`), cut off (`docker network disconnect`), killed and started
// again, stopped as `homelock node --help` says (SIGTERM) and started
// again, or one link between two nodes cut (iptables). Each fault lasts
// 0.3–8 s, across DownAfter (2 s), so some nodes are removed and rejoin
// and some are not; two at once on three nodes leave no majority.
//
// Two workers per node run `homelock lock KEY --node THAT-NODE -- sh -c
// ...` in a loop on two keys homed at each node; the command appends
// four lines to the key's file, 20 ms apart. What must hold, checked as it
// runs (checkSectionLog for the files):
//   - no two commands on one key run at once, tokens grow, and a command
//     runs only while locked and, when `homelock lock` exits 0, to its end;
//   - a `homelock lock` that does not get the lock ends within waitSlack
//     (1.2 s) of its --wait, and every one within --wait plus its command's time,
//     --kill-after and 10 s: a silent node never holds a caller past its
//     deadline;
//   - `homelock lock` exits 0 or with its documented 120 (lost), 121
//     (unreachable), 122 (unavailable) or 123 (not in time);
//   - after each fault is healed (unpaused, reconnected, started), every
//     node locks a key of every home within healBound;
//   - a fault on one node (or one cut link) fails no lock through another
//     node on a key homed at a third: they are still a majority;
//   - a cut link fails no lock that begins relaySettle (2 s) into it,
//     even between its two ends: they reach each other through the
//     others (relays, docs/design.md).
//
// The schedule comes from -chaos.seed; the timings do not replay exactly
// (containers, the scheduler), so a failing seed names the faults that ran
// rather than promising the same interleaving.
func TestDockerChaos(t *testing.T) {
	seed := *chaosSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	if *chaosNodes < 3 || *chaosNodes > 9 {
		t.Fatalf("-chaos.nodes %d: want 3 to 9", *chaosNodes)
	}
	r := runChaos(t, chaosOptions{seed: seed, nodes: *chaosNodes, duration: *chaosDuration, faults: true})
	if r.violation != "" {
		t.Fatalf("%s\nfaults so far:\n%s\nreplay the schedule: go test -tags docker ./cluster_test -run 'TestDockerChaos$' -v -chaos.seed %d -chaos.nodes %d -chaos.duration %v",
			r.violation, strings.Join(r.faults, "\n"), seed, *chaosNodes, *chaosDuration)
	}
	t.Logf("seed %d, %d nodes: %s", seed, *chaosNodes, r)
	if r.exits[0] == 0 || r.healed == 0 {
		t.Fatalf("nothing to judge: %d sections ran to their end, %d faults healed", r.exits[0], r.healed)
	}
}

// The chaos run's checks can go red: with --release-at-exit and a command
// that leaves its writes running in the background, the lock ends while
// the writes go on (as documented for that flag), and the next holder's
// writes meet them in the key's file.
func TestDockerChaosCatchesOverlap(t *testing.T) {
	r := runChaos(t, chaosOptions{seed: 1, nodes: 3, duration: 20 * time.Second, unlockedWrites: true})
	if !strings.Contains(r.violation, "overlapped") {
		t.Fatalf("a command that writes on after its lock ended was not reported as an overlap: %q (%s)", r.violation, r)
	}
	t.Logf("reported: %s", r.violation)
}

type chaosOptions struct {
	seed     uint64
	nodes    int
	duration time.Duration
	faults   bool // without them, the workers alone
	// unlockedWrites runs the commands' writes in the background under
	// --release-at-exit, past the lock: a broken run the checks must see.
	unlockedWrites bool
}

// chaosResult is what a chaos run saw; violation is its first broken rule.
type chaosResult struct {
	violation   string
	faults      []string              // each fault as it ran, with its heal time
	exits       map[int]int           // `homelock lock` exit status -> count
	healed      int                   // faults after which every node locked again
	longestHeal time.Duration         // of those
	healByKind  map[string]int64      // longest heal per kind, ms
	longest     map[int]time.Duration // longest `homelock lock` run per exit status
	judged      int                   // locks run through nodes no fault touched, on keys of such homes, or across a settled cut link
	relayed     int                   // of those, locks during a settled link cut
}

func (r chaosResult) String() string {
	var exits []string
	for _, code := range slices.Sorted(maps.Keys(r.exits)) {
		exits = append(exits, fmt.Sprintf("%d×%d", code, r.exits[code]))
	}
	var kinds []string
	for _, k := range slices.Sorted(maps.Keys(r.healByKind)) {
		kinds = append(kinds, fmt.Sprintf("%s %d ms", k, r.healByKind[k]))
	}
	var longest []string
	for _, code := range slices.Sorted(maps.Keys(r.longest)) {
		longest = append(longest, fmt.Sprintf("%d in %v", code, r.longest[code].Round(time.Millisecond)))
	}
	return fmt.Sprintf("%d faults healed (longest heal %v, bound %v; by kind: %s); homelock lock exits %s (status×count), the longest of each status %s; %d sections ran to their end; %d locks ran through nodes and homes that no fault touched, or during a link cut %v old or more (%d of those), all granted",
		r.healed, r.longestHeal.Round(time.Millisecond), healBound, strings.Join(kinds, ", "), strings.Join(exits, " "), strings.Join(longest, ", "), r.exits[0], r.judged, relaySettle, r.relayed)
}

// chaosWait is each worker's --wait, chaosKillAfter its --kill-after.
const (
	chaosWait      = 3 * time.Second
	chaosKillAfter = time.Second
)

// chaosRun is one run's shared state.
type chaosRun struct {
	c    *dockerCluster
	opts chaosOptions
	dir  string
	keys []string

	homes map[string]int // key -> its home's index

	mu        sync.Mutex
	faults    faultLog
	record    *os.File // -chaos.record's file, or nil
	violation string
	logs      map[string]*keyLog // key -> its file, as checked so far
	codes     map[int]int
	longest   map[int]time.Duration
	judged    int // locks that no fault, one elsewhere, or a settled link cut overlapped
	relayed   int // of those, locks during a settled link cut
	nextID    int
}

func (ch *chaosRun) fail(format string, args ...any) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.violation == "" {
		ch.violation = fmt.Sprintf(format, args...)
	}
}

func (ch *chaosRun) failed() bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.violation != ""
}

func runChaos(t *testing.T, opts chaosOptions) chaosResult {
	c := startDockerClusterN(t, opts.nodes)
	ch := &chaosRun{c: c, opts: opts, dir: t.TempDir(), logs: map[string]*keyLog{}, codes: map[int]int{}, longest: map[int]time.Duration{}}
	ch.homes = map[string]int{}
	for h, home := range c.ids {
		for i := range 2 {
			key := keyHomedAmong(opts.nodes, home, fmt.Sprintf("chaos-%s-%d", home, i))
			ch.keys = append(ch.keys, key)
			ch.homes[key] = h
		}
	}
	for _, k := range ch.keys {
		ch.logs[k] = &keyLog{log: newSectionLog(k)}
	}
	if *chaosRecord != "" && opts.faults {
		f, err := os.Create(*chaosRecord)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Close() })
		ch.record = f
	}
	ctx, stop := context.WithCancel(context.Background())
	var workers sync.WaitGroup
	// However the test ends, no worker or lock command outlives it.
	t.Cleanup(func() { stop(); workers.Wait() })
	rng := rand.New(rand.NewPCG(opts.seed, 0x636861))
	for w := range 2 * opts.nodes {
		workers.Add(1)
		wrng := rand.New(rand.NewPCG(rng.Uint64(), uint64(w)))
		go func() {
			defer workers.Done()
			ch.work(ctx, w%opts.nodes, wrng)
		}()
	}
	res := chaosResult{healByKind: map[string]int64{}}
	end := time.Now().Add(opts.duration)
	for time.Now().Before(end) && !ch.failed() {
		if !opts.faults {
			time.Sleep(500 * time.Millisecond)
			continue
		}
		desc, kinds, healedAt := ch.fault(t, rng)
		if ch.failed() {
			res.faults = append(res.faults, desc)
			break
		}
		took, ok := ch.c.everyNodeLocksEveryHome(healedAt, ch.failed)
		ch.faultsOver(time.Now())
		ch.note(map[string]any{"healed": desc, "start": healedAt.UnixNano(), "end": healedAt.Add(took).UnixNano()})
		if ok {
			res.faults = append(res.faults, fmt.Sprintf("%s; every node locked every home's key %v after the heal", desc, took.Round(time.Millisecond)))
		} else {
			res.faults = append(res.faults, fmt.Sprintf("%s; the heal check ended %v after the heal, past %v", desc, took.Round(time.Millisecond), healBound))
			ch.fail("%s: not every node locked a key of every home within %v of the heal", desc, healBound)
			break
		}
		res.healed++
		res.longestHeal = max(res.longestHeal, took)
		for _, kind := range kinds {
			res.healByKind[kind] = max(res.healByKind[kind], took.Milliseconds())
		}
		time.Sleep(time.Duration(500+rng.IntN(2500)) * time.Millisecond)
	}
	stop()
	workers.Wait()
	if opts.unlockedWrites {
		time.Sleep(time.Second) // the background writes finish
	}
	ch.checkLogs()
	ch.mu.Lock()
	defer ch.mu.Unlock()
	res.violation, res.exits, res.longest, res.judged, res.relayed = ch.violation, ch.codes, ch.longest, ch.judged, ch.relayed
	return res
}

// sectionScript is the command each lock runs: sectionWrites lines into
// the key's file ($1), 20 ms apart, as invocation $2.
var sectionScript = fmt.Sprintf(`i=1; while [ $i -le %d ]; do echo "$HOMELOCK_TOKEN $2 $i" >> "$1"; i=$((i+1)); sleep 0.02; done`, sectionWrites)

// work locks a random key through node i, again and again, until ctx ends.
func (ch *chaosRun) work(ctx context.Context, i int, rng *rand.Rand) {
	for ctx.Err() == nil && !ch.failed() {
		key := ch.keys[rng.IntN(len(ch.keys))]
		ch.mu.Lock()
		ch.nextID++
		id := ch.nextID
		ch.mu.Unlock()
		args := []string{"lock", key, "--node", ch.c.api(i), "--wait", chaosWait.String(), "--kill-after", chaosKillAfter.String()}
		script := sectionScript
		if ch.opts.unlockedWrites {
			args = append(args, "--release-at-exit")
			script = "(" + sectionScript + ") &"
		}
		args = append(args, "--", "sh", "-c", script, "sh", ch.logFile(key), fmt.Sprint(id))
		cmd := exec.Command(ch.c.bin, args...)
		var out syncBuffer
		cmd.Stdout, cmd.Stderr = &out, &out
		start := time.Now()
		if err := dieWithTest(cmd).Start(); err != nil {
			ch.fail("start homelock lock: %v", err)
			return
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		// The deadline every run must keep, whatever the node does.
		bound := chaosWait + sectionWrites*100*time.Millisecond + chaosKillAfter + 10*time.Second
		var err error
		select {
		case err = <-done:
		case <-time.After(bound):
			_ = cmd.Process.Kill()
			<-done
			ch.fail("homelock lock %s --node n%d (invocation %d) still ran after %v: --wait %v not kept\n%s", key, i+1, id, bound, chaosWait, out.String())
			return
		case <-ctx.Done():
			// The run is over: let the lock command finish as it would.
			err = <-done
		}
		ended := time.Now()
		took := ended.Sub(start)
		code, ok := exitStatus(err)
		if !ok {
			ch.fail("homelock lock %s: %v", key, err)
			return
		}
		ch.note(map[string]any{"lock": id, "node": i + 1, "key": key, "start": start.UnixNano(), "end": ended.UnixNano(),
			"code": code, "said": strings.TrimSpace(out.String())})
		ch.mu.Lock()
		ch.codes[code]++
		ch.longest[code] = max(ch.longest[code], took)
		ch.mu.Unlock()
		switch code {
		case 121, 122, 123:
			// Not locked: COMMAND never ran, and `lock --help` says a
			// silent node ends the wait within about --wait.
			if took > chaosWait+waitSlack {
				ch.fail("homelock lock %s --node n%d (invocation %d) exited %d after %v: --wait %v not kept\n%s",
					key, i+1, id, code, took.Round(time.Millisecond), chaosWait, out.String())
				return
			}
		case 0, 120:
		default:
			ch.fail("homelock lock %s --node n%d (invocation %d) exited %d after %v, not a documented status\n%s",
				key, i+1, id, code, took.Round(time.Millisecond), out.String())
			return
		}
		if w := ch.elsewhere(i, ch.homes[key], start, ended); w != "" {
			ch.mu.Lock()
			ch.judged++
			if strings.HasSuffix(w, ", relayed") {
				ch.relayed++
			}
			ch.mu.Unlock()
			if code != 0 {
				ch.fail("homelock lock %s (home n%d) --node n%d (invocation %d) exited %d during %s, where a majority reaches both nodes\n%s",
					key, ch.homes[key]+1, i+1, id, code, w, out.String())
				return
			}
		}
		exit := code
		if ch.opts.unlockedWrites { // there, exit 0 comes before the writes
			exit = -1
		}
		if ch.checkLog(key, id, exit) {
			return
		}
	}
}

// faultsOver ends every open fault window at end.
func (ch *chaosRun) faultsOver(end time.Time) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.faults.over(end)
}

// elsewhere is faultLog.elsewhere under the run's lock.
func (ch *chaosRun) elsewhere(i, home int, start, end time.Time) string {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.faults.elsewhere(i, home, start, end)
}

// note writes one JSON line to -chaos.record's file, if there is one.
func (ch *chaosRun) note(v map[string]any) {
	if ch.record == nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	_, _ = ch.record.Write(append(b, '\n'))
}

func (ch *chaosRun) logFile(key string) string { return filepath.Join(ch.dir, key+".log") }

// keyLog is a key's file and how far the run has checked it.
type keyLog struct {
	mu  sync.Mutex
	log *sectionLog
	off int64
}

// checkLog checks what key's file gained since the last check, then, unless
// code is negative, invocation id's exit status (every line it wrote came
// before its exit, so the file now holds them), and reports whether a rule
// broke.
func (ch *chaosRun) checkLog(key string, id, code int) bool {
	kl := ch.logs[key]
	kl.mu.Lock()
	defer kl.mu.Unlock()
	v, err := kl.readOn(ch.logFile(key))
	if err != nil {
		ch.fail("read %s's log: %v", key, err)
		return true
	}
	if v == "" && code >= 0 {
		v = kl.log.exited(id, code)
	}
	if v != "" {
		ch.fail("%s", v)
		return true
	}
	return false
}

// readOn feeds the log what the file gained since the last read.
func (kl *keyLog) readOn(path string) (string, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := f.Seek(kl.off, io.SeekStart); err != nil {
		return "", err
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return "", err
	}
	kl.off += int64(len(b))
	return kl.log.add(string(b)), nil
}

// checkLogs checks every key's file to its end, once no command writes.
func (ch *chaosRun) checkLogs() {
	for _, key := range ch.keys {
		if ch.checkLog(key, 0, -1) {
			return
		}
		if v := ch.logs[key].log.end(); v != "" {
			ch.fail("%s", v)
			return
		}
	}
}

// The faults, each with its heal.
var chaosFaultKinds = []string{"pause", "cut", "kill", "stop", "link"}

// fault injects one fault, or two on different nodes overlapping in time
// (one in four), heals them, and returns what it did, the fault kinds, and
// when the last heal was done.
func (ch *chaosRun) fault(t *testing.T, rng *rand.Rand) (string, []string, time.Time) {
	type step struct {
		at     time.Duration
		what   string
		do     func() error
		window *chaosFault // for an injection
	}
	var steps []step
	n := len(ch.c.names)
	nodes := rng.Perm(n)
	count := 1
	if rng.IntN(4) == 0 {
		count = 2
	}
	var offset time.Duration
	var kinds []string
	for _, i := range nodes[:count] {
		kind := chaosFaultKinds[rng.IntN(len(chaosFaultKinds))]
		if kind == "link" && !ch.haveIPTables() {
			kind = "cut"
		}
		kinds = append(kinds, kind)
		length := time.Duration(300+rng.IntN(7700)) * time.Millisecond
		other := nodes[(slices.Index(nodes, i)+1)%n]
		inject, heal := ch.c.injector(kind, i, other)
		ch.c.undo.add(func() { _ = heal() })
		what := fmt.Sprintf("%s n%d", kind, i+1)
		w := &chaosFault{what: what, nodes: []int{i}}
		if kind == "link" {
			what = fmt.Sprintf("link n%d-n%d", i+1, other+1)
			w = &chaosFault{what: what, nodes: []int{i, other}, link: true}
		}
		steps = append(steps,
			step{offset, what + " for " + length.String(), inject, w},
			step{offset + length, "heal " + what, heal, nil})
		offset += time.Duration(rng.IntN(int(length/time.Millisecond)+1)) * time.Millisecond
	}
	slices.SortStableFunc(steps, func(a, b step) int { return int(a.at - b.at) })
	begin := time.Now()
	var done []string
	for _, s := range steps {
		time.Sleep(time.Until(begin.Add(s.at)))
		at := time.Now()
		if s.window != nil {
			ch.mu.Lock()
			ch.faults.begin(s.window, at)
			ch.mu.Unlock()
		}
		if err := s.do(); err != nil {
			ch.fail("%s: %v", s.what, err)
			break
		}
		ch.note(map[string]any{"fault": s.what, "start": at.UnixNano(), "end": time.Now().UnixNano()})
		done = append(done, fmt.Sprintf("%v %s", time.Since(begin).Round(100*time.Millisecond), s.what))
	}
	t.Logf("fault: %s", strings.Join(done, ", "))
	return strings.Join(done, ", "), kinds, time.Now()
}

func (ch *chaosRun) haveIPTables() bool {
	return exec.Command("iptables", "-L", "DOCKER-USER", "-n").Run() == nil
}

// injector returns how to inflict kind on node i (a link: between i and
// j) and how to heal it; heal is idempotent, so the test's undo may call
// it again.
func (c *dockerCluster) injector(kind string, i, j int) (inject, heal func() error) {
	run := func(args ...string) error {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	var once sync.Once
	healOnce := func(f func() error) func() error {
		return func() error {
			var err error
			once.Do(func() { err = f() })
			return err
		}
	}
	name := c.names[i]
	switch kind {
	case "pause":
		return func() error { return run("docker", "pause", name) },
			healOnce(func() error { return run("docker", "unpause", name) })
	case "cut":
		return func() error { return run("docker", "network", "disconnect", c.net, name) },
			healOnce(func() error { return run("docker", "network", "connect", "--ip", c.ips[i], c.net, name) })
	case "kill":
		return func() error { return run("docker", "kill", name) },
			healOnce(func() error { return run("docker", "start", name) })
	case "stop":
		return func() error { return run("docker", "stop", "-t", "30", name) },
			healOnce(func() error { return run("docker", "start", name) })
	case "link":
		rules := c.linkRules(i, j)
		return func() error {
				for _, r := range rules {
					if err := run(append([]string{"iptables", "-I"}, r...)...); err != nil {
						return err
					}
				}
				return nil
			}, healOnce(func() error {
				for _, r := range rules {
					_ = exec.Command("iptables", append([]string{"-D"}, r...)...).Run()
				}
				return nil
			})
	}
	panic("unknown fault " + kind)
}

// linkRules are the iptables rules (DOCKER-USER) that drop all traffic
// between nodes i and j, both ways.
func (c *dockerCluster) linkRules(i, j int) [][]string {
	return [][]string{
		{"DOCKER-USER", "-s", c.ips[i], "-d", c.ips[j], "-m", "comment", "--comment", dockerLabelArg(), "-j", "DROP"},
		{"DOCKER-USER", "-s", c.ips[j], "-d", c.ips[i], "-m", "comment", "--comment", dockerLabelArg(), "-j", "DROP"},
	}
}
