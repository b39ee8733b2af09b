package epoch

import (
	"math/rand/v2"
	"slices"
	"time"

	"github.com/homelock/homelock/msg"
)

// cluster is a hand-driven network for fixed schedules: messages wait in a
// queue until a test delivers or drops them, so a schedule reads like the
// hazard it reproduces. Durable state is kept per node as in the simulator.
type cluster struct {
	now     time.Time
	nodes   map[msg.NodeID]*Machine
	cfgs    map[msg.NodeID]Config
	dur     map[msg.NodeID]*State
	q       []msg.Envelope
	learned map[uint64][]msg.Epoch // every epoch any node learned, by number
}

func testCfg(id string) Config {
	c := simCfg
	c.Self = msg.Member{ID: msg.NodeID(id), Store: uint64(len(id))*1000 + uint64(id[len(id)-1]), Addr: id + ":1", Version: 1}
	c.Rand = rand.New(rand.NewPCG(uint64(id[len(id)-1]), 7))
	return c
}

func newCluster(ids ...string) (*cluster, []msg.Member) {
	c := &cluster{now: simBase, nodes: map[msg.NodeID]*Machine{}, cfgs: map[msg.NodeID]Config{},
		dur: map[msg.NodeID]*State{}, learned: map[uint64][]msg.Epoch{}}
	var ms []msg.Member
	for _, id := range ids {
		cfg := testCfg(id)
		c.add(cfg, State{})
		ms = append(ms, cfg.Self)
	}
	return c, ms
}

func (c *cluster) add(cfg Config, st State) *Machine {
	m := New(cfg, st)
	c.nodes[cfg.Self.ID] = m
	c.cfgs[cfg.Self.ID] = cfg
	c.dur[cfg.Self.ID] = &st
	return m
}

// out applies a step's Output: persist, record learned epochs, queue msgs.
func (c *cluster) out(id msg.NodeID, o Output) Output {
	d := c.dur[id]
	for _, r := range o.Acceptor {
		d.Acceptor = slices.DeleteFunc(d.Acceptor, func(x AcceptorRecord) bool { return x.Instance == r.Instance })
		d.Acceptor = append(d.Acceptor, r)
	}
	if o.Learned != nil {
		l := *o.Learned
		d.Learned = &l
		c.learned[l.Epoch.Number] = append(c.learned[l.Epoch.Number], l.Epoch)
	}
	c.q = append(c.q, o.Msgs...)
	return o
}

func (c *cluster) bootstrap(ms []msg.Member, ids ...string) {
	for _, id := range ids {
		c.out(msg.NodeID(id), c.nodes[msg.NodeID(id)].Bootstrap(c.now, ms))
	}
}

func (c *cluster) tick(id string) Output {
	return c.out(msg.NodeID(id), c.nodes[msg.NodeID(id)].Tick(c.now))
}

func (c *cluster) advance(d time.Duration) { c.now = c.now.Add(d) }

// deliver hands every queued message matching pred to its receiver (and the
// answers they cause, while they match too). Messages to unknown or crashed
// nodes are lost.
func (c *cluster) deliver(pred func(msg.Envelope) bool) {
	for {
		i := slices.IndexFunc(c.q, pred)
		if i < 0 {
			return
		}
		env := c.q[i]
		c.q = slices.Delete(c.q, i, i+1)
		if m, ok := c.nodes[env.To]; ok {
			c.out(env.To, m.Step(c.now, env))
		}
	}
}

func (c *cluster) deliverAll() { c.deliver(func(msg.Envelope) bool { return true }) }

func (c *cluster) drop(pred func(msg.Envelope) bool) {
	c.q = slices.DeleteFunc(c.q, pred)
}

// crash restarts id from its durable state only.
func (c *cluster) crash(id string) {
	st := cloneState(*c.dur[msg.NodeID(id)])
	c.nodes[msg.NodeID(id)] = New(c.cfgs[msg.NodeID(id)], st)
	c.drop(func(e msg.Envelope) bool { return e.To == msg.NodeID(id) })
}

// forked reports two different epochs learned for one agreed number (epoch 0
// is configured, not agreed: a node given another list has its own).
func (c *cluster) forked() bool {
	for n, es := range c.learned {
		if n == 0 {
			continue
		}
		for _, e := range es {
			if e.Digest() != es[0].Digest() {
				return true
			}
		}
	}
	return false
}

func (c *cluster) epoch(id string) msg.Epoch {
	l, _, _ := c.nodes[msg.NodeID(id)].Current()
	return l.Epoch
}

// match builders
func to(id string) func(msg.Envelope) bool {
	return func(e msg.Envelope) bool { return e.To == msg.NodeID(id) }
}
func kind(k msg.Kind) func(msg.Envelope) bool {
	return func(e msg.Envelope) bool { return e.Body.Kind() == k }
}
func between(a, b string) func(msg.Envelope) bool {
	return func(e msg.Envelope) bool {
		return (e.From.ID == msg.NodeID(a) && e.To == msg.NodeID(b)) || (e.From.ID == msg.NodeID(b) && e.To == msg.NodeID(a))
	}
}
func and(ps ...func(msg.Envelope) bool) func(msg.Envelope) bool {
	return func(e msg.Envelope) bool {
		for _, p := range ps {
			if !p(e) {
				return false
			}
		}
		return true
	}
}

// startedCluster bootstraps ids and delivers everything: all learn epoch 1.
func startedCluster(ids ...string) (*cluster, []msg.Member) {
	c, ms := newCluster(ids...)
	c.bootstrap(ms, ids...)
	c.advance(time.Millisecond)
	for _, id := range ids {
		c.tick(id)
	}
	c.deliverAll()
	return c, ms
}
