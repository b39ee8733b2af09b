package core

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/homelock/homelock/delegation"
	"github.com/homelock/homelock/epoch"
	"github.com/homelock/homelock/fence"
	"github.com/homelock/homelock/home"
	"github.com/homelock/homelock/internal/mutations"
	"github.com/homelock/homelock/internal/simtest"
	"github.com/homelock/homelock/msg"
)

// TestInteractions runs the scripts in testdata/: the conversation of N
// core.Nodes under an explicit schedule, in the manner of etcd raft's
// interaction tests. Regenerate with -rewrite, then read every output: a
// golden file that records a bug is worse than none.
func TestInteractions(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := newHarness()
		sectionStart := path + ":1"
		// A golden file may record a violation only where the script switched
		// a rule off, and every section that switches one off must show what
		// it breaks: a -rewrite cannot turn a real violation into expected
		// output, nor a mutation that nothing catches into a passing script.
		endSection := func() {
			if h.ruleOff != "" && h.violations == 0 {
				t.Errorf("%s: the section switches a rule off (%s) and no invariant caught it", sectionStart, h.ruleOff)
			}
		}
		// Without the homelock_mutations tag no rule can be switched off:
		// a section from its first mutate on is not run (its recorded
		// output stands, even under -rewrite) and the file reports a
		// skipped subtest naming the sections, so the gap is visible.
		var skipped []string
		skipping := false
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd == "reset" {
				endSection()
				h, sectionStart = newHarness(), d.Pos
				skipping = false
				return "ok"
			}
			if !skipping && d.Cmd == "mutate" && !mutations.Enabled && !d.HasArg("none") {
				skipping = true
				skipped = append(skipped, d.Pos)
			}
			if skipping {
				return d.Expected
			}
			h.out.Reset()
			h.depth = 0
			err := h.run(t, d)
			for _, v := range h.unexpected {
				t.Errorf("%s: VIOLATION with every rule on: %s", d.Pos, v)
			}
			h.unexpected = nil
			if err != nil {
				return "error: " + err.Error()
			}
			if h.out.Len() == 0 {
				return "ok"
			}
			return h.out.String()
		})
		endSection()
		if len(skipped) > 0 {
			t.Run("mutate", func(t *testing.T) {
				t.Skipf("mutate section(s) not run (%d: %s): build with -tags homelock_mutations", len(skipped), strings.Join(skipped, ", "))
			})
		}
	})
}

// args reads a command's key=value arguments; positional arguments (no
// value) are kept as flags.
type args struct {
	t  *testing.T
	kv map[string][]string
	// pos are the arguments without a value, in order (node names, durations).
	pos []string
}

func parseArgs(t *testing.T, d *datadriven.TestData) *args {
	a := &args{t: t, kv: map[string][]string{}}
	for _, c := range d.CmdArgs {
		if len(c.Vals) == 0 {
			a.pos = append(a.pos, c.Key)
			continue
		}
		a.kv[c.Key] = c.Vals
	}
	return a
}

func (a *args) str(k, def string) string {
	if v, ok := a.kv[k]; ok {
		return v[0]
	}
	return def
}

func (a *args) has(flag string) bool {
	for _, p := range a.pos {
		if p == flag {
			return true
		}
	}
	_, ok := a.kv[flag]
	return ok
}

func (a *args) dur(k string, def time.Duration) (time.Duration, error) {
	v, ok := a.kv[k]
	if !ok {
		return def, nil
	}
	return time.ParseDuration(v[0])
}

func (a *args) int(k string, def int) (int, error) {
	v, ok := a.kv[k]
	if !ok {
		return def, nil
	}
	return strconv.Atoi(v[0])
}

func (h *harness) nodeArg(a *args) (*hnode, error) {
	for _, p := range a.pos {
		if n := h.node(p); n != nil {
			return n, nil
		}
	}
	return nil, errors.New("no such node")
}

func (h *harness) liveNode(a *args) (*hnode, error) {
	n, err := h.nodeArg(a)
	if err != nil {
		return nil, err
	}
	if n.core == nil {
		return nil, fmt.Errorf("%s is down", n.id)
	}
	return n, nil
}

func (h *harness) filterArg(a *args) (*filter, error) {
	f := &filter{from: a.str("from", ""), to: a.str("to", ""), kind: a.str("kind", ""), key: a.str("key", "")}
	var err error
	if f.count, err = a.int("count", 0); err != nil {
		return nil, err
	}
	inc, err := a.int("inc", 0)
	f.inc = uint64(inc)
	return f, err
}

func (h *harness) run(t *testing.T, d *datadriven.TestData) error {
	a := parseArgs(t, d)
	switch d.Cmd {
	case "bootstrap":
		return h.cmdBootstrap(a)
	case "add-node":
		v, err := a.int("version", 1)
		if err != nil {
			return err
		}
		n := h.addNode(uint32(v))
		h.start(n, false)
		h.tick(n)
	case "join":
		n, err := h.liveNode(a)
		if err != nil {
			return err
		}
		via := h.node(a.str("via", ""))
		if via == nil {
			return errors.New("join needs via=<member>")
		}
		h.apply(n, n.core.Join(n.local(h.now), via.member))
	case "propose-remove":
		n, err := h.liveNode(a)
		if err != nil {
			return err
		}
		m := h.node(a.str("member", ""))
		if m == nil {
			return errors.New("propose-remove needs member=<node>")
		}
		h.apply(n, n.core.ProposeRemove(n.local(h.now), m.member))
	case "mutate":
		return h.cmdMutate(a)
	case "lock":
		n, err := h.liveNode(a)
		if err != nil {
			return err
		}
		locker, err := a.int("locker", 1)
		if err != nil {
			return err
		}
		wait, err := a.dur("wait", hWait)
		if err != nil {
			return err
		}
		lease, err := a.dur("lease", 0)
		if err != nil {
			return err
		}
		silent, err := a.dur("silent", 0)
		if err != nil {
			return err
		}
		now := n.local(h.now)
		h.apply(n, n.core.Lock(now, a.str("key", "k"), uint64(locker), now.Add(wait), lease, silent))
	case "unlock", "cancel":
		n, err := h.liveNode(a)
		if err != nil {
			return err
		}
		locker, err := a.int("locker", 1)
		if err != nil {
			return err
		}
		key := a.str("key", "k")
		h.chk.closeCS(n.id, key, uint64(locker))
		if d.Cmd == "cancel" {
			h.apply(n, n.core.Cancel(n.local(h.now), key, uint64(locker)))
			return nil
		}
		if rd, ok := n.core.Unlock(n.local(h.now), key, uint64(locker)); ok {
			h.apply(n, rd)
		} else {
			h.printf("%s: unlocked %s locker=%d (no messages)", n.id, key, locker)
		}
	case "settle", "fresh":
		return h.cmdHook(d.Cmd, a)
	case "deliver", "drop", "dup", "hold", "unhold", "reorder":
		return h.cmdQueue(d.Cmd, a)
	case "queue":
		for _, q := range h.queue.All() {
			h.printf("%s", h.describe(q))
		}
	case "stabilize":
		h.stabilize()
	case "advance", "run":
		if len(a.pos) == 0 {
			return errors.New("advance needs a duration")
		}
		dd, err := time.ParseDuration(a.pos[0])
		if err != nil {
			return err
		}
		h.hide = map[string]bool{}
		for _, k := range a.kv["hide"] {
			h.hide[k] = true
		}
		h.advance(h.now.Add(dd), d.Cmd == "run")
		h.printf("now %s", ts(h.now))
	case "tick":
		n, err := h.liveNode(a)
		if err != nil {
			return err
		}
		h.tick(n)
	case "crash":
		n, err := h.liveNode(a)
		if err != nil {
			return err
		}
		h.crash(n)
	case "restart":
		n, err := h.nodeArg(a)
		if err != nil {
			return err
		}
		if n.core != nil {
			h.crash(n)
		}
		h.start(n, a.has("keep-inc"))
		h.tick(n)
	case "pause":
		n, err := h.liveNode(a)
		if err != nil {
			return err
		}
		n.paused, n.stall, n.pausedAt = true, a.has("stall-clock"), h.now
		h.printf("%s: paused%s", n.id, map[bool]string{true: " (its clock stalls)"}[n.stall])
	case "resume":
		return h.cmdResume(a)
	case "clock":
		n, err := h.nodeArg(a)
		if err != nil {
			return err
		}
		if r := a.str("rate", ""); r != "" {
			// Keep the local time continuous at the change.
			l := n.local(h.now)
			rate, err := strconv.ParseFloat(r, 64)
			if err != nil {
				return err
			}
			c := simtest.NewClock(hBase, n.clock.Offset, rate)
			n.clock.Change(h.now, n.clock.Offset+l.Sub(c.Local(h.now)), rate)
		}
		h.printf("%s: clock rate=%v local=%s", n.id, n.clock.Rate, ts(n.local(h.now)))
	case "partition":
		for _, p := range a.pos {
			h.isolated[msg.NodeID(p)] = true
		}
	case "split":
		// split a=(n1,n2) b=(n3,n4,n5): each named list is a side.
		h.side = map[msg.NodeID]string{}
		for name, ids := range a.kv {
			for _, id := range ids {
				h.side[msg.NodeID(id)] = name
			}
		}
	case "heal":
		h.isolated = map[msg.NodeID]bool{}
		h.side = nil
	case "state":
		return h.cmdState(a)
	case "verbose":
		h.verbose = a.has("on")
	case "auto-epoch":
		h.autoEpoch = !a.has("off")
	case "homes":
		n, err := h.liveNode(a)
		if err != nil {
			return err
		}
		l, ok := n.core.Current()
		if !ok {
			return errors.New("no epoch")
		}
		for _, k := range a.kv["key"] {
			hm, _ := epoch.NewRing(l.Epoch).Home(k)
			h.printf("e%d %s: home %s", l.Epoch.Number, k, hm.ID)
		}
	default:
		return fmt.Errorf("unknown command %q", d.Cmd)
	}
	return nil
}

// cmdBootstrap creates n nodes (versions=1,1,2 gives each its protocol
// version) and bootstraps epoch 1 among them; epoch traffic runs at once.
func (h *harness) cmdBootstrap(a *args) error {
	cnt, err := a.int("n", 3)
	if err != nil {
		return err
	}
	vs := a.kv["versions"]
	var initial []msg.Member
	var ns []*hnode
	for i := 0; i < cnt; i++ {
		v := uint64(1)
		if i < len(vs) {
			if v, err = strconv.ParseUint(vs[i], 10, 32); err != nil {
				return err
			}
		}
		n := h.addNode(uint32(v))
		ns = append(ns, n)
		initial = append(initial, n.member)
	}
	msg.SortMembers(initial)
	for _, n := range ns {
		h.start(n, false)
	}
	for _, n := range ns {
		h.apply(n, n.core.Bootstrap(n.local(h.now), initial))
	}
	h.stabilize()
	for _, n := range ns {
		h.printf("%s: live until %s", n.id, ts(n.trueAt(n.core.LiveUntil())))
	}
	return nil
}

// cmdMutate sets the mutations nodes start with from now on:
// mutate home=(A,B) holder=C [defended], or mutate none.
func (h *harness) cmdMutate(a *args) error {
	if a.has("none") {
		h.mut.home, h.mut.holder = home.Mutations{}, delegation.Mutations{}
		h.printf("nodes started from now on run the correct protocol")
		return nil
	}
	set := func(v reflect.Value, names []string) error {
		for _, name := range names {
			f := v.FieldByName(name)
			if !f.IsValid() || f.Kind() != reflect.Bool {
				return fmt.Errorf("no mutation %q", name)
			}
			f.SetBool(true)
		}
		return nil
	}
	if err := set(reflect.ValueOf(&h.mut.home).Elem(), a.kv["home"]); err != nil {
		return err
	}
	if err := set(reflect.ValueOf(&h.mut.holder).Elem(), a.kv["holder"]); err != nil {
		return err
	}
	on := func(v reflect.Value) (names []string) {
		for i := 0; i < v.NumField(); i++ {
			if v.Field(i).Bool() {
				names = append(names, v.Type().Field(i).Name)
			}
		}
		return names
	}
	// defended: another rule still stands in the way, so the section shows
	// that no invariant breaks, and any violation fails the test.
	if !a.has("defended") {
		h.switchOff(fmt.Sprintf("mutate home=%v holder=%v", a.kv["home"], a.kv["holder"]))
	}
	h.printf("nodes started from now on run with mutations home=%v holder=%v",
		on(reflect.ValueOf(h.mut.home)), on(reflect.ValueOf(h.mut.holder)))
	return nil
}

// cmdHook completes a store hook: settle (the barrier hook of a drain) or
// fresh (the successor's wait hook). token= reports a completion for that
// token instead of the oldest one pending (a stale completion, H20);
// barrier= is what the store returns (default: its newest position).
func (h *harness) cmdHook(cmd string, a *args) error {
	n, err := h.liveNode(a)
	if err != nil {
		return err
	}
	key := a.str("key", "k")
	var tok fence.Token
	idx := -1
	for i, e := range n.hooks {
		if e.Key == key && ((cmd == "settle") == (e.Kind == delegation.Settle)) {
			tok, idx = e.Token, i
			break
		}
	}
	if s := a.str("token", ""); s != "" {
		if tok, err = fence.ParseToken(s); err != nil {
			return err
		}
		idx = -1
		for i, e := range n.hooks {
			if e.Key == key && e.Token == tok && ((cmd == "settle") == (e.Kind == delegation.Settle)) {
				idx = i
			}
		}
	} else if idx < 0 {
		return fmt.Errorf("no %s hook pending on %s for %s", cmd, n.id, key)
	}
	if idx >= 0 {
		n.hooks = append(n.hooks[:idx], n.hooks[idx+1:]...)
	}
	var herr error
	if a.has("err") {
		herr = errors.New("store unavailable")
	}
	now := n.local(h.now)
	if cmd == "fresh" {
		h.apply(n, n.core.Fresh(now, key, tok, herr))
		return nil
	}
	barrier := []byte(a.str("barrier", fmt.Sprintf("p%d", h.chk.writes[key])))
	h.settling = &tok
	h.apply(n, n.core.Settled(now, key, tok, barrier, herr))
	h.settling = nil
	return nil
}

func (h *harness) cmdQueue(cmd string, a *args) error {
	f, err := h.filterArg(a)
	if err != nil {
		return err
	}
	switch cmd {
	case "deliver":
		if h.deliver(f) == 0 {
			h.printf("(nothing to deliver)")
		}
	case "drop":
		for _, q := range h.pick(f, false) {
			h.remove(q)
			h.printf("dropped %s", h.describe(q))
		}
	case "dup":
		for _, q := range h.pick(f, false) {
			c := *q
			h.queue.Insert(h.queue.Index(is(q))+1, &c)
			h.printf("duplicated %s", h.describe(q))
		}
	case "hold":
		for _, q := range h.pick(f, false) {
			q.held = true
			h.printf("%s", h.describe(q))
		}
	case "unhold":
		for _, q := range h.pick(f, true) {
			q.held = false
			h.printf("%s", h.describe(q))
		}
	case "reorder":
		got := h.pick(f, false)
		var pos []int
		for _, q := range got {
			pos = append(pos, h.queue.Index(is(q)))
		}
		for i, p := range pos {
			h.queue.Set(p, got[len(got)-1-i])
		}
		for _, q := range slices.Backward(got) {
			h.printf("%s", h.describe(q))
		}
	}
	return nil
}

// is matches q itself.
func is(q *qmsg) func(*qmsg) bool { return func(o *qmsg) bool { return o == q } }

// stabilize delivers everything deliverable and runs due timers at the
// current time until nothing is left (bounded).
func (h *harness) stabilize() {
	for i := 0; i < 100; i++ {
		moved := h.deliver(nil) > 0
		for _, n := range h.nodes {
			if d := h.nextDue(n); !d.IsZero() && !d.After(h.now) {
				h.tickShown(n)
				moved = true
			}
		}
		if !moved {
			return
		}
	}
	h.printf("(stabilize bound reached)")
}

// cmdResume resumes a paused node. A node whose clock stalled while paused
// reads its clocks first, and the core finds wall time ahead (H9), unless
// no-jump: the lock that follows comes before the driver's timer step, so
// nothing has looked at the clocks yet (the rule switched off).
func (h *harness) cmdResume(a *args) error {
	n, err := h.liveNode(a)
	if err != nil {
		return err
	}
	if !n.paused {
		return fmt.Errorf("%s is not paused", n.id)
	}
	n.paused = false
	if n.stall {
		gap := h.now.Sub(n.pausedAt)
		n.clock.Change(h.now, n.clock.Offset-time.Duration(float64(gap)*n.clock.Rate), n.clock.Rate)
		n.stalled = append(n.stalled, [2]time.Time{n.pausedAt, h.now})
		h.printf("%s: resumed; its clock stood still for %v", n.id, gap)
		n.stall = false
		if a.has("no-jump") {
			// The clocks are not read before the lock that follows, as
			// when the driver's timer step comes after it.
			h.switchOff("clock jump not reported (no-jump)")
			h.apply(n, n.core.Tick(n.local(h.now)))
			return nil
		}
	} else {
		h.printf("%s: resumed", n.id)
	}
	h.tick(n)
	return nil
}

// cmdState prints what a node's machines say about a key, through their
// read-only accessors.
func (h *harness) cmdState(a *args) error {
	n, err := h.liveNode(a)
	if err != nil {
		return err
	}
	if l, ok := n.core.Current(); ok {
		h.printf("%s: inc=%d epoch=e%d %s live until %s", n.id, n.core.Inc(), l.Epoch.Number, memberList(l.Epoch), ts(n.trueAt(n.core.LiveUntil())))
	} else {
		h.printf("%s: inc=%d no epoch", n.id, n.core.Inc())
	}
	for _, key := range a.kv["key"] {
		if tok, holder, ok := n.core.Home().Holding(key); ok {
			h.printf("  home  %s: delegated to %s %s", key, holder, tok)
		} else {
			h.printf("  home  %s: no delegation", key)
		}
		if tok, exp, active, ok := n.core.Holder().Holding(key); ok {
			h.printf("  holder %s: holds %s until %s active=%v", key, tok, ts(n.trueAt(exp)), active)
		} else {
			h.printf("  holder %s: holds nothing", key)
		}
	}
	hs, ds := n.core.Stats()
	h.printf("  home stats: %s", strings.Trim(fmt.Sprintf("%+v", hs), "{}"))
	h.printf("  holder stats: %s", strings.Trim(fmt.Sprintf("%+v", ds), "{}"))
	return nil
}
