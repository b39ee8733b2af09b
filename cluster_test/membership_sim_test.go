package clustertest

import (
	"fmt"
	"testing"
	"time"

	"github.com/homelock/homelock/msg"
)

// Membership faults on fixed schedules, run by the production membership
// decisions (internal/core members.go) over simulated gossip. Each runs on
// 20 seeds (which vary delays, clocks, DownAfter and the workload) and must
// pass every invariant, heal within the bound (healing.go) and stay within
// its epoch budget; the log gives the worst heal time and epoch count.
func TestSimMembershipFaults(t *testing.T) {
	for _, sc := range []struct {
		name string
		// script lays the faults out from 300ms on; budget is the epochs it
		// may cost (per fault: 2 for a node that can look down, else 0).
		script func(s *Sim)
		budget int
		check  func(t *testing.T, s *Sim, r Result)
	}{
		{"restart one, no seed", func(s *Sim) { s.crashFor("n2", 2*time.Second) }, 2, nil},
		{"restart one after DownAfter, no seed", func(s *Sim) { s.crashFor("n2", s.downAfter+deadAfter+time.Second) }, 2, nil},
		{"restart two, no seed", func(s *Sim) { s.crashFor("n2", 2*time.Second); s.crashFor("n3", 2*time.Second) }, 4, nil},
		{"restart all, no seed", func(s *Sim) {
			for _, n := range s.nodes {
				s.crashFor(string(n.id), 2*time.Second)
			}
		}, 6, nil},
		{"gossip blackout past DownAfter", func(s *Sim) {
			n := s.Node("n3")
			s.blackout[n.idx] = true
			s.After(s.downAfter+deadAfter+gossipToDead+time.Second, func() { delete(s.blackout, n.idx); s.faultsOver() })
		}, 2, nil},
		{"partition past gossip to the dead", func(s *Sim) {
			n := s.Node("n1")
			s.cutOff([]*simNode{n}, false)
			s.After(s.downAfter+deadAfter+gossipToDead+time.Second, func() { s.healLinks([]*simNode{n}); s.faultsOver() })
		}, 2, nil},
		{"repeated short partitions", func(s *Sim) {
			n := s.Node("n2")
			at := time.Duration(0)
			for range 4 {
				s.After(at, func() { s.cutOff([]*simNode{n}, false) })
				s.After(at+s.downAfter+deadAfter+500*time.Millisecond, func() { s.healLinks([]*simNode{n}); s.faultsOver() })
				at += s.downAfter + deadAfter + time.Second
			}
		}, 8, nil},
		// n2 is cut off long enough to be removed, then reaches n3 again
		// while its link to n1 stays cut for several detection times: it
		// rejoins through n3 once, and n1, hearing through n3 that n2
		// lives (memberlist's refutation and indirect probes), does not
		// remove it again (seed 8031513 over a minute).
		{"partial partition", func(s *Sim) {
			n1, n2, n3 := s.Node("n1"), s.Node("n2"), s.Node("n3")
			s.cutOff([]*simNode{n2}, false)
			partial := s.downAfter + deadAfter + 500*time.Millisecond
			s.After(partial, func() { s.net.Mend(n2.idx, n3.idx); s.net.Mend(n3.idx, n2.idx) })
			s.After(partial+4*(s.downAfter+deadAfter), func() {
				s.net.Mend(n1.idx, n2.idx)
				s.net.Mend(n2.idx, n1.idx)
				s.faultsOver()
			})
		}, 2, nil},
		{"impostor with n1's ID", func(s *Sim) { s.After(time.Second, func() { s.impostor("n1", "n2"); s.faultsOver() }) }, 0,
			func(t *testing.T, s *Sim, r Result) {
				if r.Faults["duplicate_refused"] != 1 {
					t.Fatalf("impostor not refused: %v", r.Faults)
				}
				real := s.Node("n1")
				if l, ok := real.core.Current(); !ok || !l.Epoch.Has(real.member) {
					t.Fatal("the real n1 lost its membership")
				}
			}},
	} {
		t.Run(sc.name, func(t *testing.T) {
			var worst time.Duration
			var most uint64
			for seed := uint64(1); seed <= 20; seed++ {
				cfg := DefaultSimConfig(seed)
				cfg.Nodes = 3
				cfg.Script = func(s *Sim) { s.budget(sc.budget); s.After(300*time.Millisecond, func() { sc.script(s) }) }
				s := newSim(cfg)
				s.run()
				r := s.result()
				if r.Failed() {
					t.Fatal(r.Report())
				}
				if got := int(r.Epochs) - 1; got > sc.budget {
					t.Fatalf("seed %d: %d epochs after the first, budget %d", seed, got, sc.budget)
				}
				if sc.check != nil {
					sc.check(t, s, r)
				}
				worst, most = max(worst, r.HealedAfter), max(most, r.Epochs-1)
			}
			t.Logf("%s: healed at most %v after the last fault; at most %d epochs after the first (budget %d)", sc.name, worst, most, sc.budget)
		})
	}
}

// crashFor crashes node id now and restarts it after d, with no seed.
func (s *Sim) crashFor(id string, d time.Duration) {
	n := s.Node(id)
	s.crash(n)
	s.After(d, func() { s.restart(n); s.faultsOver() })
}

// impostor starts a process under node ID id with a fresh store and its own
// address, joining through via's gossip address: a second process given
// one node ID.
func (s *Sim) impostor(id, via string) {
	n := s.addNode(len(s.nodes))
	n.id = msg.NodeID(id)
	n.member.ID, n.member.Addr = n.id, fmt.Sprintf("%s~impostor", id)
	n.seeds = []string{gossipAddr(s.Node(via))}
	s.faults["impostor"]++
	s.trace("impostor %s via %s", id, via)
	n.start(s, nil)
}
