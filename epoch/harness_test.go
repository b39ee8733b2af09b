package epoch

import (
	"math/rand/v2"
	"time"

	"github.com/homelock/homelock/internal/simtest"
	"github.com/homelock/homelock/msg"
)

// cluster is a hand-driven network for fixed schedules: messages wait in a
// mailbox until a test delivers or drops them, so a schedule reads like the
// hazard it reproduces. Each node keeps a disk as in the simulator, and the
// shared agreement checker watches every epoch learned.
type cluster struct {
	now   time.Time
	nodes map[msg.NodeID]*Machine
	cfgs  map[msg.NodeID]Config
	disks map[msg.NodeID]*disk
	q     simtest.Mailbox[msg.Envelope]
	agree simtest.Agreement[msg.NodeID]
	// broken are the violations the agreement checker found, by invariant.
	broken map[string]int
}

// disk is what survives a node's crash.
type disk = simtest.Disk[AcceptorRecord, Learned]

// state is what a restart loads from d.
func state(d *disk) State {
	st := State{Acceptor: d.Acceptors()}
	if l := d.Learned(); l != nil {
		c := cloneLearned(*l)
		st.Learned = &c
	}
	return cloneState(st)
}

func testCfg(id string) Config {
	c := simCfg
	c.Self = msg.Member{ID: msg.NodeID(id), Store: uint64(len(id))*1000 + uint64(id[len(id)-1]), Addr: id + ":1", Version: 1}
	c.Rand = rand.New(rand.NewPCG(uint64(id[len(id)-1]), 7))
	return c
}

func newCluster(ids ...string) (*cluster, []msg.Member) {
	c := &cluster{now: simBase, nodes: map[msg.NodeID]*Machine{}, cfgs: map[msg.NodeID]Config{},
		disks: map[msg.NodeID]*disk{}, broken: map[string]int{}}
	// Epoch 0 is each node's configured list: a node given another one
	// (TestBootstrapDifferentListRefused) holds its own.
	c.agree = simtest.Agreement[msg.NodeID]{
		Fail:           func(inv, _ string, _ ...any) { c.broken[inv]++ },
		EpochLease:     simCfg.EpochLease,
		Base:           simBase,
		ConfiguredZero: true,
	}
	var ms []msg.Member
	for _, id := range ids {
		cfg := testCfg(id)
		c.add(cfg, State{})
		ms = append(ms, cfg.Self)
	}
	return c, ms
}

// add starts a node on a new disk holding st (a wiped disk when st is
// empty and the node ID ran before).
func (c *cluster) add(cfg Config, st State) *Machine {
	m := New(cfg, st)
	c.nodes[cfg.Self.ID] = m
	c.cfgs[cfg.Self.ID] = cfg
	d := simtest.NewDisk[AcceptorRecord, Learned](cfg.Self.Store)
	for _, r := range st.Acceptor {
		d.SyncAcceptor(r.Instance, cloneRecord(r))
	}
	if st.Learned != nil {
		d.SyncLearned(cloneLearned(*st.Learned))
	}
	c.disks[cfg.Self.ID] = &d
	c.agree.Forget(cfg.Self.ID)
	return m
}

// out applies a step's Output: persist, check what was learned, queue msgs.
func (c *cluster) out(id msg.NodeID, o Output) Output {
	d := c.disks[id]
	for _, r := range o.Acceptor {
		d.SyncAcceptor(r.Instance, cloneRecord(r))
	}
	if o.Learned != nil {
		l := cloneLearned(*o.Learned)
		d.SyncLearned(l)
		c.agree.Learned(id, c.now, l.Epoch, func(prev *msg.Epoch) error { return verifyCert(l.Epoch, l.Cert, prev) })
	}
	if m := c.nodes[id]; m != nil {
		if lu := m.LiveUntil(); !lu.IsZero() {
			if l, _, ok := m.Current(); ok {
				c.agree.Live(l.Epoch.Number, lu, 0)
			}
		}
	}
	c.q.Post(o.Msgs...)
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
		env, ok := c.q.Take(pred)
		if !ok {
			return
		}
		if m, ok := c.nodes[env.To]; ok {
			c.out(env.To, m.Step(c.now, env))
		}
	}
}

func (c *cluster) deliverAll() { c.deliver(func(msg.Envelope) bool { return true }) }

func (c *cluster) drop(pred func(msg.Envelope) bool) { c.q.Drop(pred) }

// crash restarts id from its durable state only.
func (c *cluster) crash(id string) {
	c.nodes[msg.NodeID(id)] = New(c.cfgs[msg.NodeID(id)], state(c.disks[msg.NodeID(id)]))
	c.drop(func(e msg.Envelope) bool { return e.To == msg.NodeID(id) })
}

// forked reports two different epochs learned for one agreed number (epoch 0
// is configured, not agreed: a node given another list has its own).
func (c *cluster) forked() bool { return c.broken[simtest.InvEpochFork] > 0 }

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
