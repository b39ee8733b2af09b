package clustertest

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/homelock/homelock/fence"
)

// The checks of the Docker chaos run (docker_chaos_test.go) that need no
// Docker: its key files and its faults' reach.

// A section log is what the commands run under `homelock lock KEY` wrote to
// KEY's file, one line per write, appended (O_APPEND, one write a line, so
// the file's order is the order in which the host's kernel took the
// writes):
//
//	TOKEN ID N
//
// TOKEN is the command's HOMELOCK_TOKEN, ID the invocation that ran it (one
// per `homelock lock`), N the write's number within it, from 1. The file
// is the resource the lock guards, and the order of its lines is true time
// on one machine, so it needs no clock:
//   - a section's first line must carry a token above every earlier
//     section's (tokens grow, and a fenced resource would take it);
//   - once a section has written, no earlier section writes again (if it
//     does, both commands ran at once: the older one still ran, unlocked,
//     after the newer one had the lock);
//   - two sections never carry one token;
//   - an invocation that exited 0 wrote all its lines (its command ran to
//     the end under the lock), and one that exited 121, 122 or 123 (not
//     locked) wrote none: `homelock lock` never runs its command unlocked.
//
// An overlap in which the older command never writes after the newer one
// began goes unseen; the commands write every few milliseconds to make
// that window small.

// sectionWrites is how many lines each command writes.
const sectionWrites = 4

// sectionLog checks one key's log as it grows: add takes what was appended
// since the last call, exited each invocation's exit status, so a run of
// many locks reads every line once.
type sectionLog struct {
	key      string
	sections map[int]*logSection
	byToken  map[fence.Token]int
	latest   int    // ID of the section that began last, -1 before any
	lines    int    // complete lines taken
	rest     string // a last line whose newline has not come yet
	exits    map[int]int
}

type logSection struct {
	token fence.Token
	lines int
}

func newSectionLog(key string) *sectionLog {
	return &sectionLog{key: key, sections: map[int]*logSection{}, byToken: map[fence.Token]int{}, latest: -1, exits: map[int]int{}}
}

// add takes the bytes appended to the log since the last call and returns
// the first rule they break, or "". A line is judged once its newline has
// come: a reader may see a write half done.
func (l *sectionLog) add(appended string) string {
	text := l.rest + appended
	cut := strings.LastIndexByte(text, '\n') + 1
	l.rest = text[cut:]
	for line := range strings.Lines(text[:cut]) {
		l.lines++
		if v := l.line(strings.TrimSuffix(line, "\n")); v != "" {
			return v
		}
	}
	return ""
}

func (l *sectionLog) line(line string) string {
	n := l.lines
	f := strings.Fields(line)
	if len(f) != 3 {
		return fmt.Sprintf("%s line %d: %q is not TOKEN ID N", l.key, n, line)
	}
	tok, err := fence.ParseToken(f[0])
	id, errID := strconv.Atoi(f[1])
	seq, errSeq := strconv.Atoi(f[2])
	if err != nil || errID != nil || errSeq != nil {
		return fmt.Sprintf("%s line %d: %q is not TOKEN ID N", l.key, n, line)
	}
	s, seen := l.sections[id]
	switch {
	case !seen:
		if other, dup := l.byToken[tok]; dup {
			return fmt.Sprintf("%s line %d: sections %d and %d both hold token %s", l.key, n, other, id, tok)
		}
		if l.latest >= 0 && !l.sections[l.latest].token.Less(tok) {
			return fmt.Sprintf("%s line %d: section %d began with token %s, not above %s of section %d before it",
				l.key, n, id, tok, l.sections[l.latest].token, l.latest)
		}
		s = &logSection{token: tok}
		l.sections[id], l.byToken[tok], l.latest = s, id, id
	case s.token != tok:
		return fmt.Sprintf("%s line %d: section %d wrote token %s, and %s before", l.key, n, id, tok, s.token)
	case id != l.latest:
		return fmt.Sprintf("%s line %d: section %d (token %s) wrote after section %d (token %s) began: two critical sections of %s overlapped",
			l.key, n, id, tok, l.latest, l.sections[l.latest].token, l.key)
	}
	s.lines++
	if seq != s.lines {
		return fmt.Sprintf("%s line %d: section %d's write %d came as its number %d", l.key, n, id, seq, s.lines)
	}
	if s.lines > sectionWrites {
		return fmt.Sprintf("%s line %d: section %d wrote %d lines, more than its %d", l.key, n, id, s.lines, sectionWrites)
	}
	if code, ok := l.exits[id]; ok {
		return l.judge(id, code)
	}
	return ""
}

// exited records that invocation id's `homelock lock` exited with code,
// once the log holds everything written before that exit, and returns the
// first rule its lines break, or "". Lines it writes later are judged
// against the status as they come.
func (l *sectionLog) exited(id, code int) string {
	l.exits[id] = code
	if v := l.judge(id, code); v != "" {
		return v
	}
	if code == 0 {
		lines := 0
		if s := l.sections[id]; s != nil {
			lines = s.lines
		}
		if lines != sectionWrites {
			return fmt.Sprintf("%s: invocation %d exited 0 after %d of its %d writes", l.key, id, lines, sectionWrites)
		}
	}
	return ""
}

// judge checks invocation id's lines so far against its exit status: a lock
// not granted ran nothing.
func (l *sectionLog) judge(id, code int) string {
	if s := l.sections[id]; s != nil && code >= 121 && code <= 123 {
		return fmt.Sprintf("%s: invocation %d exited %d (not locked), but its command wrote %d lines", l.key, id, code, s.lines)
	}
	return ""
}

// end returns the rule the log's end breaks: a last line never finished.
func (l *sectionLog) end() string {
	if l.rest != "" {
		return fmt.Sprintf("%s line %d: %q has no newline at the end of the log", l.key, l.lines+1, l.rest)
	}
	return ""
}

// checkSectionLog returns the first broken rule in key's whole log, or "".
// exits maps an invocation's ID to `homelock lock`'s exit status; an ID
// with no entry is not checked for completeness.
func checkSectionLog(key, log string, exits map[int]int) string {
	l := newSectionLog(key)
	if v := l.add(log); v != "" {
		return v
	}
	for _, id := range slices.Sorted(maps.Keys(exits)) {
		if v := l.exited(id, exits[id]); v != "" {
			return v
		}
	}
	return l.end()
}

func TestCheckSectionLog(t *testing.T) {
	full := func(tok string, id int) string {
		var b strings.Builder
		for i := 1; i <= sectionWrites; i++ {
			fmt.Fprintf(&b, "%s %d %d\n", tok, id, i)
		}
		return b.String()
	}
	for _, tc := range []struct {
		name  string
		log   string
		exits map[int]int
		want  string // substring of the finding; "" for none
	}{
		{name: "empty", log: ""},
		{name: "two in order", log: full("e1.i1.c1.s1", 1) + full("e1.i1.c1.s2", 2), exits: map[int]int{1: 0, 2: 0}},
		{name: "new incarnation and epoch", log: full("e1.i1.c9.s4", 1) + full("e1.i2.c1.s1", 2) + full("e2.i1.c1.s1", 3)},
		{name: "lost lock, cut short", log: "e1.i1.c1.s1 1 1\n" + full("e1.i1.c2.s1", 2), exits: map[int]int{1: 120, 2: 0}},
		{name: "not locked, nothing written", log: full("e1.i1.c1.s1", 1), exits: map[int]int{1: 0, 2: 121, 3: 122, 4: 123}},
		{name: "older writes after newer began",
			log: "e1.i1.c1.s1 1 1\ne1.i1.c1.s2 2 1\ne1.i1.c1.s1 1 2\n", want: "overlapped"},
		{name: "token goes back",
			log: full("e2.i1.c1.s1", 1) + full("e1.i1.c5.s1", 2), want: "not above"},
		{name: "token repeated by another section",
			log: full("e1.i1.c1.s1", 1) + full("e1.i1.c1.s1", 2), want: "both hold token"},
		{name: "same token, later section",
			log: full("e1.i1.c1.s2", 1) + "e1.i1.c1.s1 2 1\n", want: "not above"},
		{name: "section changes token", log: "e1.i1.c1.s1 1 1\ne1.i1.c1.s2 1 2\n", want: "wrote token"},
		{name: "write skipped", log: "e1.i1.c1.s1 1 1\ne1.i1.c1.s1 1 3\n", want: "came as its number"},
		{name: "exit 0 cut short", log: "e1.i1.c1.s1 1 1\n", exits: map[int]int{1: 0}, want: "exited 0 after 1"},
		{name: "exit 0, never wrote", log: "", exits: map[int]int{1: 0}, want: "exited 0 after 0"},
		{name: "ran though not locked", log: full("e1.i1.c1.s1", 1), exits: map[int]int{1: 123}, want: "not locked"},
		{name: "garbage", log: "hello\n", want: "not TOKEN ID N"},
		{name: "bad token", log: "x1.i1 1 1\n", want: "not TOKEN ID N"},
		{name: "empty line", log: full("e1.i1.c1.s1", 1) + "\n", want: "not TOKEN ID N"},
		{name: "last line unfinished", log: full("e1.i1.c1.s1", 1) + "e1.i1.c1.s2 2", want: "no newline"},
		{name: "more writes than the script makes", log: full("e1.i1.c1.s1", 1) + "e1.i1.c1.s1 1 5\n", want: "more than its 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := checkSectionLog("k", tc.log, tc.exits)
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Fatalf("checkSectionLog = %q, want %q", got, tc.want)
			}
			// Read as the chaos run reads it, a few bytes at a time, half
			// lines included, the verdict is the same.
			for size := 1; size <= 7; size++ {
				l := newSectionLog("k")
				var v string
				for rest := tc.log; rest != "" && v == ""; {
					n := min(size, len(rest))
					v, rest = l.add(rest[:n]), rest[n:]
				}
				for _, id := range slices.Sorted(maps.Keys(tc.exits)) {
					if v == "" {
						v = l.exited(id, tc.exits[id])
					}
				}
				if v == "" {
					v = l.end()
				}
				if v != got {
					t.Fatalf("read %d bytes at a time: %q, whole: %q", size, v, got)
				}
			}
		})
	}
}

// An exit status is judged against lines that come after it too: a lock
// command that said "not locked" while its command went on running.
func TestSectionLogLinesAfterExit(t *testing.T) {
	l := newSectionLog("k")
	if v := l.add("e1.i1.c1.s1 1 1\n"); v != "" {
		t.Fatal(v)
	}
	if v := l.exited(2, 122); v != "" {
		t.Fatal(v)
	}
	if v := l.add("e1.i1.c1.s1 1 2\ne1.i1.c2.s1 2 1\n"); !strings.Contains(v, "invocation 2 exited 122 (not locked)") {
		t.Fatalf("a write of an invocation that exited 122: %q", v)
	}
}

// chaosFault is a fault from just before it was injected until every node
// locked again after its heal (end zero until then).
type chaosFault struct {
	what       string
	nodes      []int // the node it silences, or a cut link's two ends
	link       bool  // a cut between nodes[0] and nodes[1] only
	start, end time.Time
}

// faultLog is the chaos run's faults as they came.
type faultLog struct{ faults []*chaosFault }

func (l *faultLog) begin(f *chaosFault, at time.Time) {
	f.start = at
	l.faults = append(l.faults, f)
}

// over ends every open fault at end.
func (l *faultLog) over(end time.Time) {
	for _, f := range l.faults {
		if f.end.IsZero() {
			f.end = end
		}
	}
}

// relaySettle is how long into a cut link every lock must be granted
// again, whichever nodes it goes through: each end relays through the
// others once the other has acknowledged nothing for RelayAfter (a
// quarter of MaxLease: 200 ms with the chaos run's 800 ms) and the sender
// has read that as it writes (within 50 ms), with room for a loaded host
// (it was set when RelayAfter was 1 s).
const relaySettle = 2 * time.Second

// elsewhere says what faults there were if a lock through node i on a key
// homed at home, run from start to end, overlapped no fault, one that
// touched neither node, or one cut link that had been cut for
// relaySettle when the lock began; "" otherwise. One node paused, cut off,
// killed, stopped, or cut from one peer, leaves the others a majority, so
// locks between them must go on, and a cut link's two ends reach each
// other through the rest (two faults at once on three nodes leave no
// majority, and are not judged). A second after the heal check passed is
// the fault's too.
func (l *faultLog) elsewhere(i, home int, start, end time.Time) string {
	var during []*chaosFault
	for _, f := range l.faults {
		if f.start.Before(end) && (f.end.IsZero() || f.end.Add(time.Second).After(start)) {
			during = append(during, f)
		}
	}
	switch {
	case len(during) > 1:
		return ""
	case len(during) == 0:
		return "no fault"
	case during[0].link && !start.Before(during[0].start.Add(relaySettle)):
		return "only " + during[0].what + ", relayed"
	case slices.Contains(during[0].nodes, i) || slices.Contains(during[0].nodes, home):
		return ""
	}
	return "only " + during[0].what
}

func TestFaultLogElsewhere(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	var l faultLog
	l.begin(&chaosFault{what: "pause n1", nodes: []int{0}}, at(10))
	l.over(at(20))
	l.begin(&chaosFault{what: "link n2-n3", nodes: []int{1, 2}, link: true}, at(30))
	l.begin(&chaosFault{what: "kill n4", nodes: []int{3}}, at(35))
	l.over(at(40))
	l.begin(&chaosFault{what: "cut n5", nodes: []int{4}}, at(50)) // still on
	for _, tc := range []struct {
		name       string
		node, home int
		start, end float64
		want       string
	}{
		{"before any fault", 1, 2, 1, 4, "no fault"},
		{"between faults", 1, 2, 22, 25, "no fault"},
		{"through the paused node", 0, 2, 12, 15, ""},
		{"homed at the paused node", 1, 0, 12, 15, ""},
		{"elsewhere during the pause", 1, 2, 12, 15, "only pause n1"},
		{"ends as the pause begins", 1, 2, 8, 10.5, "only pause n1"},
		{"within a second of the heal check", 0, 2, 20.5, 22, ""},
		{"past that second", 0, 2, 21.5, 22, "no fault"},
		{"through a cut link's end", 2, 0, 31, 33, ""},
		{"across a cut link, before it settled", 2, 1, 31.9, 33, ""},
		{"elsewhere during the link cut", 0, 4, 31, 33, "only link n2-n3"},
		{"across a cut link once relayed", 2, 1, 32, 34, "only link n2-n3, relayed"},
		{"through a cut link's end once relayed", 1, 0, 33, 34.9, "only link n2-n3, relayed"},
		{"two faults at once", 0, 4, 34, 36, ""},
		{"a fault still on", 0, 1, 60, 61, "only cut n5"},
		{"through the node still cut", 4, 1, 60, 61, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := l.elsewhere(tc.node, tc.home, at(tc.start), at(tc.end)); got != tc.want {
				t.Fatalf("elsewhere(n%d, home n%d, %v-%v s) = %q, want %q", tc.node+1, tc.home+1, tc.start, tc.end, got, tc.want)
			}
		})
	}
}
