package fence

import (
	"bytes"
	"testing"
)

// The stored records are read back by NewGuard, Apply, Resources and
// Reconcile; a corrupt one must be ErrCorruptRecord, never a panic or a
// misread, and one record has one encoding.

func FuzzModeRecord(f *testing.F) {
	rec := modeRecord{Mode: ModeEnforce, EnforcedAt: 7, EnforcedHighest: tok(1, 2, 3), Unlogged: 1}
	rec.WouldRefuse[ReasonStaleOwner] = 4
	f.Add(rec.encode())
	f.Add((&modeRecord{}).encode())
	f.Add([]byte{recordVersion, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeModeRecord(b)
		if err != nil {
			return
		}
		if r.Mode != 0 && !r.Mode.valid() {
			t.Fatalf("decoded mode %d", r.Mode)
		}
		if e := r.encode(); !bytes.Equal(e, b) {
			t.Fatalf("decoded %+v re-encodes to %x, input %x", r, e, b)
		}
	})
}

func FuzzDefaultMode(f *testing.F) {
	f.Add(encodeDefaultMode(ModeShadow))
	f.Add(encodeDefaultMode(ModeEnforce))
	f.Add([]byte{recordVersion, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeDefaultMode(b)
		if err != nil {
			return
		}
		if !m.valid() || !bytes.Equal(encodeDefaultMode(m), b) {
			t.Fatalf("decoded %d from %x", m, b)
		}
	})
}

func FuzzWouldRefusal(f *testing.F) {
	w := WouldRefusal{Owner: "worker-7", Token: tok(4, 2, 9), Segment: 3, Reason: ReasonDuplicateOp, Seq: 11}
	w.PayloadDigest[0] = 0xaa
	f.Add(w.encode())
	f.Add((&WouldRefusal{Reason: ReasonBadGrant}).encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeWouldRefusal("r", "op", b)
		if err != nil {
			return
		}
		if got.Reason == ReasonNone || got.Reason >= reasonCount || got.Resource != "r" || got.OpID != "op" {
			t.Fatalf("decoded %+v", got)
		}
		if e := got.encode(); !bytes.Equal(e, b) {
			t.Fatalf("decoded %+v re-encodes to %x, input %x", got, e, b)
		}
	})
}

// Every record the Guard reads back: state, receipt, operation index,
// quarantine. Round trips where the encoding is canonical.
func FuzzStoredRecords(f *testing.F) {
	st := resourceState{Domain: "cluster-a", Scope: ScopeCluster, Highest: tok(1, 2, 3), LastSegment: 4, Accepted: 5, version: stateExact}
	rc := Receipt{OpID: "op", Token: tok(1, 2, 3), Segment: 4, Seq: 5}
	q := Quarantined{Owner: "o", OpID: "op", Token: tok(1, 2, 3), Segment: 4, Payload: []byte("p"), Accepted: rc}
	f.Add(st.encode())
	floor := st
	floor.version = stateFloor
	f.Add(floor.encode())
	pruned := st
	pruned.PrunedBelow = tok(1, 2, 1)
	f.Add(pruned.encode())
	pruned.version = stateFloor
	f.Add(pruned.encode())
	f.Add(rc.encode())
	f.Add(encodeOpRef(tok(1, 2, 3), 4))
	f.Add(q.encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		if s, err := decodeState(b); err == nil && !bytes.Equal(s.encode(), b) {
			t.Fatalf("state %+v re-encodes differently from %x", s, b)
		}
		if r, err := decodeReceipt("", b); err == nil && !bytes.Equal(r.encode(), b) {
			t.Fatalf("receipt %+v re-encodes differently from %x", r, b)
		}
		if tk, seg, err := decodeOpRef(b); err == nil && !bytes.Equal(encodeOpRef(tk, seg), b) {
			t.Fatalf("operation index %s/%d re-encodes differently from %x", tk, seg, b)
		}
		_, _ = decodeQuarantined("", b)
	})
}
