package clustertest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/homelock/homelock"
	"github.com/homelock/homelock/fence"
)

// KV is a small replicated last-writer-wins store that embeds homelock's
// lock() the way a replicated database would. It is what the real-cluster
// tests write through.
//
// Each KV has its own Pebble. A write under a lock handle goes through a
// fence.Guard that shares that Pebble, so the fence records (highest token,
// segment, receipt) and the business value land in one synced batch (F6).
// The write is then replicated to every other KV asynchronously, over a KVNet
// (one queue and one goroutine per ordered pair, in order per pair); a
// replica applies each run of queued writes to distinct keys in one synced
// batch (fence.Guard.ApplyBatch).
//
// The token check. Every value carries its Version, (token, timestamp),
// ordered by token first. A replica applies a replicated write only if it is
// newer than what it holds, and applies it through its own Guard, under the
// writer's signed grant: so a stale holder's late write, whatever its
// timestamp, never overwrites a newer holder's (invariant 4 in docs/design.md), and a
// replica's Guard knows the highest token any replica accepted for the key once
// the write reaches it. A local write whose handle is no longer valid, or that
// the Guard refuses (fence.ErrStaleOwner and kin), is refused with that error
// and counted as a rejected fenced write (Rejected, and the node's
// Stats.FencedWrites through Node.CountFencedWrite).
//
// Successor freshness (docs/design.md). BarrierHook, the node's Config.Barrier,
// returns the key's version on this replica once no local write to it is in
// flight; WaitFreshHook, Config.WaitFresh, waits until this replica holds that
// version or a newer one. So after a clean handoff the next holder, on any
// node, reads its predecessor's write.
type KV struct {
	id    string
	op    string
	db    *pebble.DB
	guard *fence.Guard
	net   *KVNet
	node  atomic.Pointer[homelock.Node]

	mu      sync.Mutex
	keys    map[string]*kvKey
	lastTS  uint64
	changed chan struct{} // closed and replaced when a version advances
	closed  bool
	// writes counts the writes in flight to db, each registered under mu
	// while !closed, so that Close waits them out before closing db.
	writes sync.WaitGroup
	// stopPrune stops the pruning goroutine (nil: none); pruned is closed
	// when it has returned.
	stopPrune context.CancelFunc
	pruned    chan struct{}

	rejected       atomic.Uint64 // local writes refused (invalid handle or fence)
	replicaApplied atomic.Uint64 // replicated writes applied here
	replicaStale   atomic.Uint64 // replicated writes not newer than what is held
	replicaRefused atomic.Uint64 // replicated writes this replica's Guard refused
	pruneFailed    atomic.Uint64 // Prune calls that failed
}

// kvKey is the per-key state of a replica.
type kvKey struct {
	// mu serialises writes to the key (local and replicated) with the
	// barrier hook: the hook returns only when no write is in flight.
	mu sync.Mutex
	// ver is the version of the value held (zero: none).
	ver Version
	// segTok and seg are the token and the last segment the Guard accepted
	// for the key: a next write under segTok is segment seg+1 (F5).
	segTok fence.Token
	seg    uint64
}

// Version orders values of one key: fencing token first, then timestamp.
type Version struct {
	Token fence.Token
	TS    uint64
}

// Compare returns -1, 0 or +1.
func (v Version) Compare(o Version) int {
	if c := v.Token.Compare(o.Token); c != 0 {
		return c
	}
	switch {
	case v.TS < o.TS:
		return -1
	case v.TS > o.TS:
		return 1
	}
	return 0
}

func (v Version) String() string { return fmt.Sprintf("%s@%d", v.Token, v.TS) }

const versionLen = fence.TokenSize + 8

// encode is 40 bytes whose byte order is version order.
func (v Version) encode() []byte {
	b, _ := v.Token.AppendBinary(make([]byte, 0, versionLen))
	return binary.BigEndian.AppendUint64(b, v.TS)
}

func decodeVersion(b []byte) (Version, error) {
	if len(b) != versionLen {
		return Version{}, fmt.Errorf("kv: version of %d bytes, want %d", len(b), versionLen)
	}
	var v Version
	if err := v.Token.UnmarshalBinary(b[:fence.TokenSize]); err != nil {
		return Version{}, fmt.Errorf("kv: version: %w", err)
	}
	v.TS = binary.BigEndian.Uint64(b[fence.TokenSize:])
	return v, nil
}

// Pebble layout: values under "v/", the Guard's records under its prefix.
var (
	kvValuePrefix = []byte("v/")
	kvGuardPrefix = []byte("\x00fence/")
)

func valueKey(key string) []byte { return append(append([]byte(nil), kvValuePrefix...), key...) }

// KVConfig configures a KV.
type KVConfig struct {
	// ID is the node ID of the node the KV runs beside: the Owner of its
	// writes, and its name on the KVNet.
	ID string
	// Dir holds the KV's Pebble.
	Dir string
	// KeyRing verifies grants (the cluster's); Domain is the cluster ID.
	KeyRing *fence.KeyRing
	Domain  string
	// Operation is the nodes' Config.GrantOperation.
	Operation string
	// Net replicates writes to the other KVs on it.
	Net *KVNet
	// GuardMode is the Guard's default mode (fence.GuardOptions.DefaultMode;
	// zero: enforce).
	GuardMode fence.Mode
	// PruneEvery, if positive, bounds what the Guard stores: every
	// PruneEvery the KV prunes each key's receipts below the fence the key
	// had one period before (fence.Guard.Prune), so a receipt lives one to
	// two periods. Zero keeps every receipt. Nothing in this store asks for
	// a receipt after its write returned, so any period is safe here; a
	// store whose writers reconcile after a takeover prunes only below
	// fences they no longer ask about.
	PruneEvery time.Duration
}

// OpenKV opens (or reopens) a KV and attaches it to its KVNet.
func OpenKV(cfg KVConfig) (*KV, error) {
	db, err := pebble.Open(cfg.Dir, fence.UseBloomFilters(&pebble.Options{Logger: quietPebble{}, CacheSize: 64 << 20}))
	if err != nil {
		return nil, fmt.Errorf("kv %s: open pebble: %w", cfg.ID, err)
	}
	g, err := fence.NewGuard(db, cfg.KeyRing, fence.GuardOptions{Prefix: kvGuardPrefix, Domain: cfg.Domain, DefaultMode: cfg.GuardMode})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("kv %s: guard: %w", cfg.ID, err)
	}
	kv := &KV{id: cfg.ID, op: cfg.Operation, db: db, guard: g, net: cfg.Net, keys: map[string]*kvKey{}, changed: make(chan struct{})}
	if err := kv.load(); err != nil {
		_ = db.Close()
		return nil, err
	}
	if kv.net != nil {
		if err := kv.net.attach(kv); err != nil {
			_ = db.Close()
			return nil, err
		}
	}
	if cfg.PruneEvery > 0 {
		var ctx context.Context
		ctx, kv.stopPrune = context.WithCancel(context.Background())
		kv.pruned = make(chan struct{})
		go kv.pruneLoop(ctx, cfg.PruneEvery)
	}
	return kv, nil
}

// pruneLoop prunes every key's receipts below the fence it had a period
// before, every period, until Close.
func (kv *KV) pruneLoop(ctx context.Context, every time.Duration) {
	defer close(kv.pruned)
	t := time.NewTicker(every)
	defer t.Stop()
	var marks map[string]fence.Token
	done := map[string]fence.Token{} // the fence each key was last pruned below
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for key, below := range marks {
			if done[key] == below {
				continue // not written since: nothing new to prune
			}
			if _, err := kv.guard.Prune(ctx, key, below); err != nil {
				if ctx.Err() == nil {
					kv.pruneFailed.Add(1)
				}
				continue
			}
			done[key] = below
		}
		marks = kv.fences()
	}
}

// fences is the fence of every key that has one: the token of the last
// write this replica accepted to it, which the Guard's highest is at least.
func (kv *KV) fences() map[string]fence.Token {
	kv.mu.Lock()
	keys := make(map[string]*kvKey, len(kv.keys))
	for name, k := range kv.keys {
		keys[name] = k
	}
	kv.mu.Unlock()
	out := make(map[string]fence.Token, len(keys))
	for name, k := range keys {
		k.mu.Lock()
		if !k.segTok.IsZero() {
			out[name] = k.segTok
		}
		k.mu.Unlock()
	}
	return out
}

// Settle returns once the KV has no deferred work left, or when ctx is
// done: with PruneEvery set, every key's receipts pruned below its current
// fence now instead of a period or two later, and then no flush or
// compaction running in its Pebble for three checks in a row. What a
// measurement takes for an idle process afterwards is not this store
// catching up.
func (kv *KV) Settle(ctx context.Context) error {
	if kv.stopPrune != nil {
		for key, below := range kv.fences() {
			if _, err := kv.guard.Prune(ctx, key, below); err != nil {
				return err
			}
		}
	}
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for quiet := 0; quiet < 3; {
		if m := kv.db.Metrics(); m.Compact.NumInProgress == 0 && m.Flush.NumInProgress == 0 {
			quiet++
		} else {
			quiet = 0
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-t.C:
		}
	}
	return nil
}

// PruneFailures counts the Prune calls that failed (0 on a sound store).
func (kv *KV) PruneFailures() uint64 { return kv.pruneFailed.Load() }

// load reads the versions and the Guard's segments back after a reopen.
func (kv *KV) load() error {
	upper := append(append([]byte(nil), kvValuePrefix[:len(kvValuePrefix)-1]...), kvValuePrefix[len(kvValuePrefix)-1]+1)
	it, err := kv.db.NewIter(&pebble.IterOptions{LowerBound: kvValuePrefix, UpperBound: upper})
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		v, err := decodeVersion(it.Value()[:min(versionLen, len(it.Value()))])
		if err != nil {
			_ = it.Close()
			return err
		}
		k := kv.key(string(it.Key()[len(kvValuePrefix):]))
		k.ver = v
		kv.lastTS = max(kv.lastTS, v.TS)
	}
	if err := it.Close(); err != nil {
		return err
	}
	infos, err := kv.guard.Resources(context.Background())
	if err != nil {
		return err
	}
	for _, ri := range infos {
		k := kv.key(ri.Resource)
		k.segTok, k.seg = ri.Highest, ri.LastSegment
	}
	return nil
}

// Attach sets the node that Update locks through (again after a restart).
func (kv *KV) Attach(n *homelock.Node) { kv.node.Store(n) }

// ID is the KV's node ID.
func (kv *KV) ID() string { return kv.id }

// Guard is the fence.Guard every write to this KV goes through.
func (kv *KV) Guard() *fence.Guard { return kv.guard }

// Rejected counts local writes refused: an invalid handle or a fence error.
func (kv *KV) Rejected() uint64 { return kv.rejected.Load() }

// ReplicaStats counts replicated writes: applied, dropped as not newer, and
// refused by this replica's Guard.
func (kv *KV) ReplicaStats() (applied, stale, refused uint64) {
	return kv.replicaApplied.Load(), kv.replicaStale.Load(), kv.replicaRefused.Load()
}

// key returns the state of key, creating it (kv.mu held, or during load).
func (kv *KV) key(key string) *kvKey {
	k := kv.keys[key]
	if k == nil {
		k = &kvKey{}
		kv.keys[key] = k
	}
	return k
}

func (kv *KV) keyState(key string) *kvKey {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	return kv.key(key)
}

// Get returns this replica's value of key and its version.
func (kv *KV) Get(key string) ([]byte, Version, bool, error) {
	b, closer, err := kv.db.Get(valueKey(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, Version{}, false, nil
	}
	if err != nil {
		return nil, Version{}, false, err
	}
	defer closer.Close()
	if len(b) < versionLen {
		return nil, Version{}, false, fmt.Errorf("kv %s: value of %q too short", kv.id, key)
	}
	v, err := decodeVersion(b[:versionLen])
	if err != nil {
		return nil, Version{}, false, err
	}
	return bytes.Clone(b[versionLen:]), v, true, nil
}

// Version is this replica's version of key (zero: none).
func (kv *KV) Version(key string) Version {
	k := kv.keyState(key)
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ver
}

// ErrKVClosed is returned by a KV after Close.
var ErrKVClosed = errors.New("kv: closed")

// Update locks key on this KV's node, reads the local value, computes the new
// one with f, writes it under the handle through the Guard, and unlocks. It
// returns the value read and the value written. committed reports whether the
// write reached this replica (with err set only by Unlock, or nil): callers
// recording a history need it, since a lease lost after the commit makes
// Unlock fail although the write happened.
func (kv *KV) Update(ctx context.Context, key string, f func(old []byte) []byte, opts ...homelock.LockOption) (old, written []byte, committed bool, err error) {
	n := kv.node.Load()
	if n == nil {
		return nil, nil, false, fmt.Errorf("kv %s: no node attached", kv.id)
	}
	h, err := n.Lock(ctx, key, opts...)
	if err != nil {
		return nil, nil, false, err
	}
	old, _, _, err = kv.Get(key)
	if err != nil {
		_ = h.Unlock()
		return nil, nil, false, err
	}
	written = f(old)
	if _, err := kv.Put(h.Context(), h, key, written); err != nil {
		_ = h.Unlock()
		return old, nil, false, err
	}
	return old, written, true, h.Unlock()
}

// Put writes value to key under h: refused with ErrLeaseExpired if h is no
// longer valid, and by the Guard if its token is below the highest this
// replica accepted for key. A refusal is counted as a rejected fenced write.
func (kv *KV) Put(ctx context.Context, h homelock.Handle, key string, value []byte) (Version, error) {
	return kv.put(ctx, h, key, value, true)
}

// putUnchecked is Put without the handle check: what a writer that ignores
// Valid (or was paused between checking it and writing) sends. Only the Guard
// stands between it and the store.
func (kv *KV) putUnchecked(ctx context.Context, h homelock.Handle, key string, value []byte) (Version, error) {
	return kv.put(ctx, h, key, value, false)
}

func (kv *KV) put(ctx context.Context, h homelock.Handle, key string, value []byte, checkValid bool) (Version, error) {
	if h.Key() != key {
		return Version{}, fmt.Errorf("kv %s: handle for %q used to write %q", kv.id, h.Key(), key)
	}
	k := kv.keyState(key)
	k.mu.Lock()
	defer k.mu.Unlock()
	if checkValid {
		if err := h.Valid(); err != nil {
			kv.reject()
			return Version{}, err
		}
	}
	tok := h.Token()
	seg := uint64(1)
	if tok == k.segTok {
		seg = k.seg + 1
	}
	kv.mu.Lock()
	if kv.closed {
		kv.mu.Unlock()
		return Version{}, ErrKVClosed
	}
	kv.writes.Add(1)
	defer kv.writes.Done()
	kv.lastTS++
	ver := Version{Token: tok, TS: kv.lastTS}
	kv.mu.Unlock()

	w := replWrite{
		from:    kv.id,
		key:     key,
		signed:  h.Grant(),
		opID:    fmt.Sprintf("%s/%s/%d", kv.id, tok, seg),
		seg:     seg,
		payload: append(ver.encode(), value...),
		ver:     ver,
	}
	if err := kv.apply(ctx, k, w); err != nil {
		kv.reject()
		return Version{}, err
	}
	if kv.net != nil {
		kv.net.replicate(w)
	}
	return ver, nil
}

func (kv *KV) reject() {
	kv.rejected.Add(1)
	if n := kv.node.Load(); n != nil {
		n.CountFencedWrite()
	}
}

// apply commits w through the Guard and records its version (k.mu held).
func (kv *KV) apply(ctx context.Context, k *kvKey, w replWrite) error {
	it := kv.item(w)
	if _, err := kv.guard.Apply(ctx, it.Mutation, it.Stage); err != nil {
		return err
	}
	kv.mu.Lock()
	kv.committed(k, w)
	close(kv.changed)
	kv.changed = make(chan struct{})
	kv.mu.Unlock()
	return nil
}

// item is w as a Guard mutation that stages its value.
func (kv *KV) item(w replWrite) fence.BatchItem {
	return fence.BatchItem{
		Mutation: fence.Mutation{
			Signed: w.signed, Resource: w.key, Owner: w.from, Operation: kv.op,
			OpID: w.opID, Section: w.ver.Token.Section, Segment: w.seg, Payload: w.payload,
		},
		Stage: func(b *pebble.Batch) error { return b.Set(valueKey(w.key), w.payload, nil) },
	}
}

// committed records that w is stored (k.mu and kv.mu held); the caller
// wakes the waiters on kv.changed.
func (kv *KV) committed(k *kvKey, w replWrite) {
	k.segTok, k.seg = w.ver.Token, w.seg
	k.ver = w.ver
	kv.lastTS = max(kv.lastTS, w.ver.TS)
}

// applyRemote is the replica side: it applies each of ws (distinct keys)
// that is newer than what this replica holds (token first), through this
// replica's Guard, all of them in one synced commit.
func (kv *KV) applyRemote(ws []replWrite) {
	kv.mu.Lock()
	if kv.closed { // dropped, as by a crashed replica
		kv.mu.Unlock()
		return
	}
	kv.writes.Add(1)
	defer kv.writes.Done()
	kv.mu.Unlock()
	// Each key's lock, in key order (a writer holds one at a time), from
	// the version check until the commit.
	order := make([]int, len(ws))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(ws[a].key, ws[b].key) })
	for j := 1; j < len(order); j++ {
		if ws[order[j]].key == ws[order[j-1]].key {
			panic(fmt.Sprintf("kv %s: key %q twice in one replicated batch", kv.id, ws[order[j]].key))
		}
	}
	ks := make([]*kvKey, len(ws))
	for _, i := range order {
		ks[i] = kv.keyState(ws[i].key)
		ks[i].mu.Lock()
	}
	defer func() {
		for _, k := range ks {
			k.mu.Unlock()
		}
	}()
	items := make([]fence.BatchItem, 0, len(ws))
	at := make([]int, 0, len(ws))
	for i, w := range ws {
		if w.ver.Compare(ks[i].ver) <= 0 {
			kv.replicaStale.Add(1)
			continue
		}
		items = append(items, kv.item(w))
		at = append(at, i)
	}
	if len(items) == 0 {
		return
	}
	_, errs := kv.guard.ApplyBatch(context.Background(), items)
	kv.mu.Lock()
	defer kv.mu.Unlock()
	for j, err := range errs {
		if err != nil {
			kv.replicaRefused.Add(1)
			continue
		}
		i := at[j]
		kv.committed(ks[i], ws[i])
		kv.replicaApplied.Add(1)
	}
	close(kv.changed)
	kv.changed = make(chan struct{})
}

// BarrierHook is the node's Config.Barrier: once no write to key is in flight
// on this replica, it returns the key's version here, or the inherited
// barrier if that is newer (barriers never go backwards).
func (kv *KV) BarrierHook(ctx context.Context, key string, inherited []byte) ([]byte, error) {
	k := kv.keyState(key)
	k.mu.Lock()
	cur := k.ver
	k.mu.Unlock()
	if len(inherited) > 0 {
		in, err := decodeVersion(inherited)
		if err != nil {
			return nil, err
		}
		if in.Compare(cur) > 0 {
			return inherited, nil
		}
	}
	if cur == (Version{}) {
		return inherited, nil
	}
	return cur.encode(), nil
}

// WaitFreshHook is the node's Config.WaitFresh: it returns once this replica
// holds key at barrier's version or newer.
func (kv *KV) WaitFreshHook(ctx context.Context, key string, barrier []byte) error {
	if len(barrier) == 0 {
		return nil
	}
	want, err := decodeVersion(barrier)
	if err != nil {
		return err
	}
	k := kv.keyState(key)
	for {
		kv.mu.Lock()
		ch, closed := kv.changed, kv.closed
		kv.mu.Unlock()
		k.mu.Lock()
		have := k.ver
		k.mu.Unlock()
		if have.Compare(want) >= 0 {
			return nil
		}
		if closed {
			return ErrKVClosed
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("kv %s: key %q at %s, waiting for %s: %w", kv.id, key, have, want, ctx.Err())
		}
	}
}

// Close detaches the KV from its KVNet (what was queued to or from it is
// dropped, as for a crashed replica) and closes its Pebble.
func (kv *KV) Close() error {
	kv.mu.Lock()
	if kv.closed {
		kv.mu.Unlock()
		return nil
	}
	kv.closed = true
	close(kv.changed)
	kv.changed = make(chan struct{})
	kv.mu.Unlock()
	if kv.net != nil {
		kv.net.detach(kv)
	}
	if kv.stopPrune != nil {
		kv.stopPrune()
		<-kv.pruned
	}
	kv.writes.Wait()
	return kv.db.Close()
}

// replWrite is one accepted write as it travels to the other replicas: the
// writer's signed grant and the mutation its Guard accepted.
type replWrite struct {
	from    string
	key     string
	signed  []byte
	opID    string
	seg     uint64
	payload []byte
	ver     Version
}

// quietPebble discards Pebble's log.
type quietPebble struct{}

func (quietPebble) Infof(string, ...any)  {}
func (quietPebble) Errorf(string, ...any) {}
func (quietPebble) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("kv: pebble fatal: "+format, args...))
}

// KVNet replicates writes between the KVs attached to it: one FIFO queue and
// one goroutine per ordered pair, so replication is asynchronous and in order
// per pair, and a slow replica holds up no other. Pause holds everything to
// and from one KV (a stopped process) until Resume.
type KVNet struct {
	mu     sync.Mutex
	cond   *sync.Cond
	kvs    map[string]*KV
	links  map[[2]string]*kvLink
	paused map[string]bool
	delay  time.Duration
}

type kvLink struct {
	from, to string
	q        []queued
	batch    []replWrite // run's buffer for the writes it applies together
	busy     bool
	stop     bool
	stopCh   chan struct{}
	done     chan struct{}
}

type queued struct {
	w   replWrite
	due time.Time
}

// NewKVNet returns an empty replication network.
func NewKVNet() *KVNet {
	n := &KVNet{kvs: map[string]*KV{}, links: map[[2]string]*kvLink{}, paused: map[string]bool{}}
	n.cond = sync.NewCond(&n.mu)
	return n
}

func (n *KVNet) attach(kv *KV) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.kvs[kv.id]; ok {
		return fmt.Errorf("kv: %s is already attached", kv.id)
	}
	for id := range n.kvs {
		n.startLink(kv.id, id)
		n.startLink(id, kv.id)
	}
	n.kvs[kv.id] = kv
	return nil
}

func (n *KVNet) startLink(from, to string) {
	l := &kvLink{from: from, to: to, stopCh: make(chan struct{}), done: make(chan struct{})}
	n.links[[2]string{from, to}] = l
	go n.run(l)
}

// detach stops every link to and from kv and waits for their goroutines;
// what was queued on them is lost.
func (n *KVNet) detach(kv *KV) {
	n.mu.Lock()
	delete(n.kvs, kv.id)
	var stopped []*kvLink
	for id, l := range n.links {
		if l.from == kv.id || l.to == kv.id {
			l.stop = true
			close(l.stopCh)
			stopped = append(stopped, l)
			delete(n.links, id)
		}
	}
	n.cond.Broadcast()
	n.mu.Unlock()
	for _, l := range stopped {
		<-l.done
	}
}

func (n *KVNet) replicate(w replWrite) {
	n.mu.Lock()
	defer n.mu.Unlock()
	due := time.Now().Add(n.delay)
	for _, l := range n.links {
		if l.from == w.from {
			l.q = append(l.q, queued{w, due})
		}
	}
	n.cond.Broadcast()
}

func (n *KVNet) run(l *kvLink) {
	defer close(l.done)
	n.mu.Lock()
	defer n.mu.Unlock()
	for {
		for !l.stop && (len(l.q) == 0 || n.paused[l.from] || n.paused[l.to]) {
			n.cond.Wait()
		}
		if l.stop {
			return
		}
		if wait := time.Until(l.q[0].due); wait > 0 {
			n.mu.Unlock()
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-l.stopCh:
			}
			t.Stop()
			n.mu.Lock()
			continue
		}
		// Every write due at the head of the queue, up to the first that
		// names a key taken already, goes to the replica in one batch: one
		// synced commit (on a disk, a sync per write bounded the "with the
		// write" phase; on tmpfs it changes nothing measurable).
		now := time.Now()
		ws := l.batch[:0]
		for _, q := range l.q {
			if len(ws) == maxReplBatch || q.due.After(now) || slices.ContainsFunc(ws, func(w replWrite) bool { return w.key == q.w.key }) {
				break
			}
			ws = append(ws, q.w)
		}
		dst := n.kvs[l.to]
		clear(l.q[:len(ws)])
		l.q = l.q[len(ws):]
		l.busy = true
		n.mu.Unlock()
		dst.applyRemote(ws)
		n.mu.Lock()
		clear(ws)
		l.batch = ws[:0]
		l.busy = false
		n.cond.Broadcast()
	}
}

// maxReplBatch bounds the writes a replica applies in one batch.
const maxReplBatch = 64

// SetDelay holds every replicated write for d after it was accepted (a slow
// replication path: what makes successor freshness matter).
func (n *KVNet) SetDelay(d time.Duration) {
	n.mu.Lock()
	n.delay = d
	n.mu.Unlock()
}

// Pause holds every replicated write to and from id until Resume.
func (n *KVNet) Pause(id string) {
	n.mu.Lock()
	n.paused[id] = true
	n.mu.Unlock()
}

// Resume lets id's replication flow again, in order.
func (n *KVNet) Resume(id string) {
	n.mu.Lock()
	delete(n.paused, id)
	n.cond.Broadcast()
	n.mu.Unlock()
}

// Settled reports whether no replicated write is queued or being applied on
// a link that is not paused.
func (n *KVNet) Settled() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, l := range n.links {
		if n.paused[l.from] || n.paused[l.to] {
			continue
		}
		if len(l.q) > 0 || l.busy {
			return false
		}
	}
	return true
}
