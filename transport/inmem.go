package transport

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/homelock/homelock/msg"
	"github.com/homelock/homelock/transport/pb"
)

// NetworkConfig configures an in-memory Network.
type NetworkConfig struct {
	// Seed drives the drop and delay draws, so a run's faults repeat. (The
	// order in which goroutines call Send still varies between runs; for
	// fully deterministic schedules drive the state machines without a
	// transport, as cluster_test's simulator does.)
	Seed uint64
	// SkipCodec hands envelopes across as Go values instead of running each
	// through Encode and Decode. The codec is on by default so every test
	// that uses the network also exercises the wire format.
	SkipCodec bool
	// QueueLen bounds each link's queue (one per ordered pair of nodes);
	// beyond it Send drops and counts Stats.Dropped. Default 4096.
	QueueLen int
	// Logger receives drops and refusals at debug level; nil discards.
	Logger *slog.Logger
}

// Network connects in-memory endpoints by node ID within one process, with
// the faults the cluster tests inject. Each ordered pair of nodes is a link
// with its own queue and goroutine: delivery is asynchronous and in send
// order per link, and one slow or delayed link holds up no other.
//
// Faults and when they apply:
//   - SetDrop: each envelope is lost with the given probability when sent.
//   - SetDelay: each envelope is held for a uniform draw in [min, max] from
//     when it was sent; a link never reorders, so a short draw behind a long
//     one waits for it.
//   - Partition (symmetric) and Block (one way): checked at delivery, so
//     nothing crosses a cut once it is made, including envelopes already
//     queued; Heal removes every cut. Those envelopes are lost, not held.
//   - Pause: a paused node's links, in and out, stop delivering; what it
//     sends and what is sent to it while paused stays queued (up to
//     QueueLen per link, beyond that dropped) and is delivered, in order,
//     after Resume, as a stopped process's kernel buffers would. A cut made
//     meanwhile still applies at delivery.
//
// An envelope for a node with no open endpoint is lost when it comes due;
// one for a node that restarted (a new endpoint under the same ID) reaches
// the new endpoint, as a real network would.
type Network struct {
	cfg NetworkConfig
	log *slog.Logger

	mu        sync.Mutex
	rng       *rand.Rand
	closed    bool
	endpoints map[msg.NodeID]*Endpoint
	links     map[link]*linkQueue
	drop      map[link]float64
	delay     map[link][2]time.Duration
	cut       map[link]bool
	paused    map[msg.NodeID]bool
	// resumed is closed and replaced on every Resume and Close, waking links
	// that wait for a paused node.
	resumed chan struct{}
}

// link is an ordered pair of nodes. Any ("") in a fault setting matches
// every node.
type link struct{ from, to msg.NodeID }

// Any is the wildcard node for SetDrop and SetDelay.
const Any msg.NodeID = ""

// NewNetwork returns an empty network.
func NewNetwork(cfg NetworkConfig) *Network {
	if cfg.QueueLen <= 0 {
		cfg.QueueLen = 4096
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Network{
		cfg:       cfg,
		log:       cfg.Logger,
		rng:       rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		endpoints: make(map[msg.NodeID]*Endpoint),
		links:     make(map[link]*linkQueue),
		drop:      make(map[link]float64),
		delay:     make(map[link][2]time.Duration),
		cut:       make(map[link]bool),
		paused:    make(map[msg.NodeID]bool),
		resumed:   make(chan struct{}),
	}
}

// Endpoint attaches a node. Its ID must not have an open endpoint; after
// that endpoint's Close the ID may attach again (a restart).
func (n *Network) Endpoint(self msg.Member, h Handler) (*Endpoint, error) {
	if h == nil {
		return nil, fmt.Errorf("%w: Handler is nil", ErrBadConfig)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, ErrClosed
	}
	if _, ok := n.endpoints[self.ID]; ok {
		return nil, fmt.Errorf("%w: %q", ErrAddrInUse, self.ID)
	}
	e := &Endpoint{net: n, self: self, handler: h}
	n.endpoints[self.ID] = e
	return e, nil
}

// SetDrop makes the link from → to lose each envelope with probability p
// (0 removes the setting). Any matches every node; the most specific
// setting wins (exact pair, then from → Any, then Any → to, then Any → Any).
func (n *Network) SetDrop(from, to msg.NodeID, p float64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if p <= 0 {
		delete(n.drop, link{from, to})
		return
	}
	n.drop[link{from, to}] = min(p, 1)
}

// SetDelay holds each envelope on from → to for a uniform draw in [lo, hi]
// (both 0 removes the setting). Any matches as for SetDrop.
func (n *Network) SetDelay(from, to msg.NodeID, lo, hi time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if lo <= 0 && hi <= 0 {
		delete(n.delay, link{from, to})
		return
	}
	n.delay[link{from, to}] = [2]time.Duration{max(lo, 0), max(hi, lo)}
}

// Partition cuts every link between nodes of different groups, both ways.
// Nodes in no group keep their links. It adds to the cuts already made.
func (n *Network) Partition(groups ...[]msg.NodeID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for i, g := range groups {
		for j, h := range groups {
			if i == j {
				continue
			}
			for _, a := range g {
				for _, b := range h {
					n.cut[link{a, b}] = true
				}
			}
		}
	}
}

// Block cuts the link from → to only: to still reaches from.
func (n *Network) Block(from, to msg.NodeID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cut[link{from, to}] = true
}

// Heal removes every partition and block (not drop rates, delays or pauses).
func (n *Network) Heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.cut)
}

// Pause stops everything to and from id until Resume (see Network).
func (n *Network) Pause(id msg.NodeID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.paused[id] = true
}

// Resume delivers what waited for id, in order, and lets traffic flow again.
func (n *Network) Resume(id msg.NodeID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.paused, id)
	close(n.resumed)
	n.resumed = make(chan struct{})
}

// Close closes every endpoint and stops every link goroutine.
func (n *Network) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	eps := make([]*Endpoint, 0, len(n.endpoints))
	for _, e := range n.endpoints {
		eps = append(eps, e)
	}
	n.mu.Unlock()
	for _, e := range eps {
		e.Close()
	}
	// Links to nodes that never had an endpoint stop here too.
	n.mu.Lock()
	links := make([]*linkQueue, 0, len(n.links))
	for k, l := range n.links {
		links = append(links, l)
		delete(n.links, k)
	}
	n.mu.Unlock()
	for _, l := range links {
		l.stop()
	}
	return nil
}

// lookup returns the most specific setting for l in m.
func lookup[V any](m map[link]V, l link) (V, bool) {
	for _, k := range [...]link{l, {l.from, Any}, {Any, l.to}, {Any, Any}} {
		if v, ok := m[k]; ok {
			return v, true
		}
	}
	var zero V
	return zero, false
}

// Endpoint is one node's Transport on a Network.
type Endpoint struct {
	net     *Network
	self    msg.Member
	handler Handler
	stats   counters

	closed atomic.Bool
	// inHandler is read-held around each Handler call, so Close can wait for
	// the calls in flight: none starts after Close returns. (A Handler must
	// therefore not Close its own endpoint.)
	inHandler sync.RWMutex
}

var (
	_ Transport = (*Endpoint)(nil)
	_ Batcher   = (*Endpoint)(nil)
)

// item is one envelope in a link's queue.
type item struct {
	env  msg.Envelope
	data []byte // nil when the codec is skipped
	due  time.Time
}

// Send implements Transport.
func (e *Endpoint) Send(to msg.Member, env msg.Envelope) error {
	return e.SendBatch(to, []msg.Envelope{env})
}

// SendBatch implements Batcher: the envelopes enter the link together, as
// one frame (each still meets its own drop draw; they share one delay).
func (e *Endpoint) SendBatch(to msg.Member, envs []msg.Envelope) error {
	if e.closed.Load() {
		return ErrClosed
	}
	var errs []error
	items := make([]item, 0, len(envs))
	for _, env := range envs {
		it := item{env: env}
		if !e.net.cfg.SkipCodec {
			data, err := pb.Encode(env)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			it.data = data
		} else if env.Body == nil {
			errs = append(errs, fmt.Errorf("%w: envelope has no body", ErrUnknownMessage))
			continue
		}
		items = append(items, it)
	}
	if len(items) == 0 {
		return errors.Join(errs...)
	}
	n := e.net
	l := link{e.self.ID, to.ID}

	n.mu.Lock()
	defer n.mu.Unlock()
	// Checked again under n.mu: Close removes e's links under it, so a link
	// made here after that would outlive the endpoint.
	if n.closed || e.closed.Load() {
		return ErrClosed
	}
	e.stats.frames.Add(1)
	var d time.Duration
	drawn := false
	for _, it := range items {
		e.stats.sent(it.env.Body.Kind(), len(it.data))
		if p, ok := lookup(n.drop, l); ok && n.rng.Float64() < p {
			e.stats.faultDropped.Add(1)
			continue
		}
		if r, ok := lookup(n.delay, l); ok && !drawn {
			drawn = true
			d = r[0]
			if r[1] > r[0] {
				d += time.Duration(n.rng.Int64N(int64(r[1]-r[0]) + 1))
			}
		}
		q := n.links[l]
		if q == nil {
			q = newLinkQueue(n, l, e)
			n.links[l] = q
		}
		it.due = time.Now().Add(d)
		// A link never reorders: an envelope is due no earlier than the one
		// before it.
		if it.due.Before(q.lastDue) {
			it.due = q.lastDue
		}
		select {
		case q.ch <- it:
			q.lastDue = it.due
		default:
			e.stats.dropped.Add(1)
		}
	}
	return errors.Join(errs...)
}

// Stats implements Transport.
func (e *Endpoint) Stats() Stats { return e.stats.snapshot() }

// Close detaches the endpoint and stops its outgoing links. Envelopes already
// queued to it are delivered to a later endpoint with its ID, if any.
func (e *Endpoint) Close() error {
	if e.closed.Swap(true) {
		return nil
	}
	n := e.net
	n.mu.Lock()
	if n.endpoints[e.self.ID] == e {
		delete(n.endpoints, e.self.ID)
	}
	var out []*linkQueue
	for k, l := range n.links {
		if l.sender == e {
			out = append(out, l)
			delete(n.links, k)
		}
	}
	n.mu.Unlock()
	for _, l := range out {
		l.stop()
	}
	e.inHandler.Lock()
	defer e.inHandler.Unlock()
	return nil
}

// linkQueue carries one sender's envelopes to one destination in order.
type linkQueue struct {
	net    *Network
	l      link
	sender *Endpoint
	ch     chan item
	// lastDue is the due time of the last envelope queued (under net.mu).
	lastDue time.Time
	done    chan struct{}
	exited  chan struct{}
}

func newLinkQueue(n *Network, l link, sender *Endpoint) *linkQueue {
	q := &linkQueue{
		net: n, l: l, sender: sender,
		ch:     make(chan item, n.cfg.QueueLen),
		done:   make(chan struct{}),
		exited: make(chan struct{}),
	}
	go q.run()
	return q
}

func (q *linkQueue) stop() {
	close(q.done)
	<-q.exited
}

func (q *linkQueue) run() {
	defer close(q.exited)
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for {
		var it item
		select {
		case it = <-q.ch:
		case <-q.done:
			return
		}
		if wait := time.Until(it.due); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-q.done:
				return
			}
		}
		if !q.waitUnpaused() {
			return
		}
		q.deliver(it)
	}
}

// waitUnpaused blocks while either end of the link is paused; false means
// the link was stopped meanwhile.
func (q *linkQueue) waitUnpaused() bool {
	n := q.net
	for {
		n.mu.Lock()
		paused := n.paused[q.l.from] || n.paused[q.l.to]
		resumed := n.resumed
		n.mu.Unlock()
		if !paused {
			return true
		}
		select {
		case <-resumed:
		case <-q.done:
			return false
		}
	}
}

func (q *linkQueue) deliver(it item) {
	n := q.net
	n.mu.Lock()
	cut := n.cut[q.l]
	dst := n.endpoints[q.l.to]
	n.mu.Unlock()
	if cut || dst == nil {
		q.sender.stats.faultDropped.Add(1)
		return
	}
	env := it.env
	if it.data != nil {
		var err error
		if env, err = pb.Decode(it.data); err != nil {
			dst.stats.refused.Add(1)
			n.log.Debug("transport: in-memory refused envelope", "from", string(q.l.from), "to", string(q.l.to), "err", err)
			return
		}
	}
	dst.inHandler.RLock()
	defer dst.inHandler.RUnlock()
	if dst.closed.Load() {
		q.sender.stats.faultDropped.Add(1)
		return
	}
	dst.stats.received(env.Body.Kind(), len(it.data))
	dst.handler(env)
}
