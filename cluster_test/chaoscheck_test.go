package clustertest

import (
	"fmt"
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

// checkSectionLog returns the first broken rule in key's log, or "".
// exits maps an invocation's ID to `homelock lock`'s exit status; an ID
// with no entry is not checked for completeness.
func checkSectionLog(key, log string, exits map[int]int) string {
	type section struct {
		token fence.Token
		lines int
	}
	sections := map[int]*section{}
	byToken := map[fence.Token]int{}
	latest := -1 // ID of the section that began last
	for n, line := range strings.Split(strings.TrimRight(log, "\n"), "\n") {
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return fmt.Sprintf("%s line %d: %q is not TOKEN ID N", key, n+1, line)
		}
		tok, err := fence.ParseToken(f[0])
		id, errID := strconv.Atoi(f[1])
		seq, errSeq := strconv.Atoi(f[2])
		if err != nil || errID != nil || errSeq != nil {
			return fmt.Sprintf("%s line %d: %q is not TOKEN ID N", key, n+1, line)
		}
		s, seen := sections[id]
		switch {
		case !seen:
			if other, dup := byToken[tok]; dup {
				return fmt.Sprintf("%s line %d: sections %d and %d both hold token %s", key, n+1, other, id, tok)
			}
			if latest >= 0 && !sections[latest].token.Less(tok) {
				return fmt.Sprintf("%s line %d: section %d began with token %s, not above %s of section %d before it",
					key, n+1, id, tok, sections[latest].token, latest)
			}
			s = &section{token: tok}
			sections[id], byToken[tok], latest = s, id, id
		case s.token != tok:
			return fmt.Sprintf("%s line %d: section %d wrote token %s, and %s before", key, n+1, id, tok, s.token)
		case id != latest:
			return fmt.Sprintf("%s line %d: section %d (token %s) wrote after section %d (token %s) began: two critical sections of %s overlapped",
				key, n+1, id, tok, latest, sections[latest].token, key)
		}
		s.lines++
		if seq != s.lines {
			return fmt.Sprintf("%s line %d: section %d's write %d came as its number %d", key, n+1, id, seq, s.lines)
		}
	}
	for id, code := range exits {
		lines := 0
		if s := sections[id]; s != nil {
			lines = s.lines
		}
		switch {
		case code == 0 && lines != sectionWrites:
			return fmt.Sprintf("%s: invocation %d exited 0 after %d of its %d writes", key, id, lines, sectionWrites)
		case code >= 121 && code <= 123 && lines > 0:
			return fmt.Sprintf("%s: invocation %d exited %d (not locked), but its command wrote %d lines", key, id, code, lines)
		}
	}
	return ""
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := checkSectionLog("k", tc.log, tc.exits)
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Fatalf("checkSectionLog = %q, want %q", got, tc.want)
			}
		})
	}
}

// chaosFault is a fault from just before it was injected until every node
// locked again after its heal (end zero until then).
type chaosFault struct {
	what       string
	nodes      []int // the node it silences, or a cut link's two ends
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

// elsewhere says what faults there were if a lock through node i on a key
// homed at home, run from start to end, overlapped no fault, or one that
// touched neither node; "" otherwise. One node paused, cut off, killed,
// stopped, or cut from one peer, leaves the others a majority, so locks
// between them must go on (two at once on three nodes leave none, and are
// not judged). A second after the heal check passed is the fault's too.
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
	l.begin(&chaosFault{what: "link n2-n3", nodes: []int{1, 2}}, at(30))
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
		{"elsewhere during the link cut", 0, 4, 31, 33, "only link n2-n3"},
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
