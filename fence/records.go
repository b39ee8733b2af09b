package fence

import (
	"cmp"
	"encoding/binary"
	"fmt"
)

// Stored layout under the Guard's prefix P. Every key names its resource with
// a uint16 length so that no resource's keys are a prefix of another's:
//
//	P 's' len res                      -> resourceState (version 2: exact; 3: a floor; 4, 5: the same after a Prune, see below)
//	P 'r' len res token(32) segment(8) -> Receipt (one per accepted segment)
//	P 'o' len res opID                 -> token(32) segment(8) of the opID's receipt
//	P 'q' len res token(32) segment(8) payloadDigest(32) -> Quarantined
//	P 'm' len res                      -> modeRecord
//	P 'w' len res opID                 -> WouldRefusal
//	P 'D'                              -> the Guard's default mode
//
// Big-endian tokens and segments make a resource's receipts sort in fence and
// segment order, so the resource's last receipt is its highest fence and last
// segment, and its Seq the count of accepted mutations. A state record of
// version 2 holds the exact fence position; one of version 3 holds a floor
// that the receipts carry on, and loadState takes the later of the two. A
// resource's first write through a cache entry stores an exact record, its
// second a floor, and later ones only their receipt and operation index
// entry: a hot resource saves a record a write (a quarter of the Guard's
// memtable inserts, the largest part of what it adds to a write), and a
// resource written once per cache residency costs its next load no scan of
// its receipts. Prune deletes receipts below a fence no higher than the
// resource's highest, so the last receipt survives it, and it stores the
// exact position with the fence it pruned below: version 4 (exact) or 5 (a
// floor) adds that fence, and a Guard of an earlier release refuses both, so
// that it never answers "no receipt" for an operation whose receipt was
// pruned. 's', 'r' and 'o' are the fence state: written only in the batch of
// an accepted mutation, Bind, Migrate or Prune (F2, F6). 'q' is the
// quarantine log, written when a conflicting segment is refused and never
// read by a check. 'm', 'w' and 'D' are the modes and the shadow log: written by
// SetMode, NewGuard and a shadow-mode commit, and read by no check but the
// choice to refuse or to log.
const (
	kindState      = 's'
	kindReceipt    = 'r'
	kindOp         = 'o'
	kindQuarantine = 'q'
	kindMode       = 'm'
	kindShadow     = 'w'
	kindDefault    = 'D'

	// recordVersion 2 stores 32-byte tokens (with the section); version 1
	// records, with 24-byte tokens, are refused as unknown.
	recordVersion = 2
	// stateExact and stateFloor are the state record's versions (above).
	// A Guard that knows only version 2 refuses a floor as corrupt, and so
	// the resource's writes: an older binary on a store this one wrote
	// fails closed instead of trusting a Highest that lags.
	stateExact = recordVersion
	stateFloor = 3
	// statePruned is added to either version when the record carries
	// PrunedBelow.
	statePruned = 2
)

func (g *Guard) resourceKey(kind byte, res string, extra int) []byte {
	k := make([]byte, 0, len(g.prefix)+1+2+len(res)+extra)
	k = append(k, g.prefix...)
	k = append(k, kind)
	return appendU16String(k, res)
}

func (g *Guard) stateKey(res string) []byte { return g.resourceKey(kindState, res, 0) }

func (g *Guard) receiptKey(res string, t Token, seg uint64) []byte {
	k := appendToken(g.resourceKey(kindReceipt, res, TokenSize+8), t)
	return binary.BigEndian.AppendUint64(k, seg)
}

func (g *Guard) opKey(res, opID string) []byte {
	return append(g.resourceKey(kindOp, res, len(opID)), opID...)
}

func (g *Guard) modeKey(res string) []byte { return g.resourceKey(kindMode, res, 0) }

func (g *Guard) shadowKey(res, opID string) []byte {
	return append(g.resourceKey(kindShadow, res, len(opID)), opID...)
}

func (g *Guard) defaultModeKey() []byte {
	return append(append([]byte(nil), g.prefix...), kindDefault)
}

func (g *Guard) quarantineKey(res string, t Token, seg uint64, digest [32]byte) []byte {
	k := appendToken(g.resourceKey(kindQuarantine, res, TokenSize+8+32), t)
	k = binary.BigEndian.AppendUint64(k, seg)
	return append(k, digest[:]...)
}

// kindBounds returns the key range holding every record of one kind.
func (g *Guard) kindBounds(kind byte) (lower, upper []byte) {
	lower = append(append([]byte(nil), g.prefix...), kind)
	upper = append(append([]byte(nil), g.prefix...), kind+1)
	return lower, upper
}

// resourceOfKey extracts the resource name from a key of the given kind.
func (g *Guard) resourceOfKey(key []byte) (string, []byte, error) {
	d := decoder{b: key[len(g.prefix)+1:], what: "record key", base: ErrCorruptRecord}
	res := d.string16("resource", MaxResourceLen)
	if d.err != nil {
		return "", nil, d.err
	}
	return res, d.b[d.off:], nil
}

// resourceState is what the Guard keeps per resource. Its fields are the
// resource's fence: F1 says Highest never decreases, and nothing but an
// accepted mutation writes it.
type resourceState struct {
	// Domain and Scope are the lock domain the resource is bound to (F4).
	Domain string
	Scope  Scope
	// Highest is the highest fence accepted, or, after a migration, the fence
	// the new domain must exceed.
	Highest Token
	// Root is the operation root of the grant that opened Highest.
	Root [32]byte
	// LastSegment is the last segment accepted under Highest.
	LastSegment uint64
	// Accepted counts accepted mutations; receipts are numbered by it.
	Accepted uint64
	// MigratedFrom is set by Migrate and cleared by the first write from the
	// new domain, which must be above Highest.
	MigratedFrom string
	// PrunedBelow is the fence Prune last deleted receipts below (zero: never
	// pruned): an operation sent under a lower fence may have been accepted
	// without a receipt left to show it.
	PrunedBelow Token
	// version is the kind of record it is stored as, stateExact or
	// stateFloor (0: not stored yet), whether or not it carries
	// PrunedBelow.
	version uint8
}

// advance moves st's fence position up to rc's when rc, an accepted
// mutation's receipt, lies above it.
func (s *resourceState) advance(rc *Receipt) {
	if c := rc.Token.Compare(s.Highest); c > 0 || c == 0 && rc.Segment > s.LastSegment {
		s.Highest, s.Root, s.LastSegment = rc.Token, rc.Root, rc.Segment
	}
	s.Accepted = max(s.Accepted, rc.Seq)
}

func (s *resourceState) encode() []byte {
	b := make([]byte, 0, 96+TokenSize+len(s.Domain)+len(s.MigratedFrom))
	v := cmp.Or(s.version, stateExact) // a state never stored is exact
	if !s.PrunedBelow.IsZero() {
		v += statePruned
	}
	b = append(b, v)
	b = appendU16String(b, s.Domain)
	b = append(b, byte(s.Scope))
	b = appendToken(b, s.Highest)
	b = append(b, s.Root[:]...)
	b = binary.BigEndian.AppendUint64(b, s.LastSegment)
	b = binary.BigEndian.AppendUint64(b, s.Accepted)
	b = appendU16String(b, s.MigratedFrom)
	if !s.PrunedBelow.IsZero() {
		b = appendToken(b, s.PrunedBelow)
	}
	return b
}

func decodeState(b []byte) (resourceState, error) {
	d := decoder{b: b, what: "resource state", base: ErrCorruptRecord}
	var s resourceState
	s.version = d.u8("version")
	pruned := s.version >= stateExact+statePruned
	if pruned {
		s.version -= statePruned
	}
	if d.err == nil && s.version != stateExact && s.version != stateFloor {
		d.fail("unknown version %d", s.version)
	}
	s.Domain = d.string16("domain", MaxNameLen)
	s.Scope = Scope(d.u8("scope"))
	s.Highest = d.token("highest")
	s.Root = d.digest("root")
	s.LastSegment = d.u64("last segment")
	s.Accepted = d.u64("accepted")
	s.MigratedFrom = d.string16("migrated from", MaxNameLen)
	if pruned {
		if s.PrunedBelow = d.token("pruned below"); d.err == nil && s.PrunedBelow.IsZero() {
			d.fail("pruned below the zero fence") // one encoding a value: unpruned has none
		}
	}
	if err := d.finish(); err != nil {
		return resourceState{}, err
	}
	if !s.Scope.valid() {
		return resourceState{}, fmt.Errorf("%w: resource state scope %d", ErrCorruptRecord, s.Scope)
	}
	return s, nil
}

func (r *Receipt) encode() []byte {
	b := make([]byte, 0, 1+2+len(r.OpID)+TokenSize+8+32+32+8)
	b = append(b, recordVersion)
	b = appendU16String(b, r.OpID)
	b = appendToken(b, r.Token)
	b = binary.BigEndian.AppendUint64(b, r.Segment)
	b = append(b, r.Root[:]...)
	b = append(b, r.PayloadDigest[:]...)
	return binary.BigEndian.AppendUint64(b, r.Seq)
}

func decodeReceipt(res string, b []byte) (Receipt, error) {
	d := decoder{b: b, what: "receipt", base: ErrCorruptRecord}
	if v := d.u8("version"); d.err == nil && v != recordVersion {
		d.fail("unknown version %d", v)
	}
	r := Receipt{Resource: res}
	r.OpID = d.string16("operation ID", MaxNameLen)
	r.Token = d.token("token")
	r.Segment = d.u64("segment")
	r.Root = d.digest("root")
	r.PayloadDigest = d.digest("payload digest")
	r.Seq = d.u64("seq")
	return r, d.finish()
}

func encodeOpRef(t Token, seg uint64) []byte {
	return binary.BigEndian.AppendUint64(appendToken(make([]byte, 0, TokenSize+8), t), seg)
}

func decodeOpRef(b []byte) (Token, uint64, error) {
	d := decoder{b: b, what: "operation index", base: ErrCorruptRecord}
	t := d.token("token")
	seg := d.u64("segment")
	return t, seg, d.finish()
}

func (q *Quarantined) encode() []byte {
	b := make([]byte, 0, 160+len(q.Owner)+len(q.OpID)+len(q.Payload))
	b = append(b, recordVersion)
	b = appendU16String(b, q.Owner)
	b = appendU16String(b, q.OpID)
	b = appendToken(b, q.Token)
	b = binary.BigEndian.AppendUint64(b, q.Segment)
	b = append(b, q.PayloadDigest[:]...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(q.Payload)))
	b = append(b, q.Payload...)
	return append(b, q.Accepted.encode()...)
}

func decodeQuarantined(res string, b []byte) (Quarantined, error) {
	d := decoder{b: b, what: "quarantine record", base: ErrCorruptRecord}
	if v := d.u8("version"); d.err == nil && v != recordVersion {
		d.fail("unknown version %d", v)
	}
	q := Quarantined{Resource: res}
	q.Owner = d.string16("owner", MaxNameLen)
	q.OpID = d.string16("operation ID", MaxNameLen)
	q.Token = d.token("token")
	q.Segment = d.u64("segment")
	q.PayloadDigest = d.digest("payload digest")
	n := d.take(4, "payload length")
	if d.err == nil {
		n := binary.BigEndian.Uint32(n)
		if n > MaxPayloadLimit {
			d.fail("payload of %d bytes", n)
		}
		q.Payload = append([]byte(nil), d.take(int(n), "payload")...)
	}
	if d.err != nil {
		return Quarantined{}, d.err
	}
	acc, err := decodeReceipt(res, d.b[d.off:])
	if err != nil {
		return Quarantined{}, err
	}
	q.Accepted = acc
	return q, nil
}
