package localstore

import (
	"errors"
	"fmt"

	"github.com/homelock/homelock/epoch"
	"github.com/homelock/homelock/msg"
)

// Record encodings. Each value starts with a version byte; a decoder refuses
// a version it does not know rather than guess (a downgrade must stop, not
// read a newer record as something else). Layouts, in codec.go's primitives:
//
//	identity v1:    1 | str nodeID | fixed64 storeID | str clusterID
//	incarnation v1: 1 | uvarint incarnation (>= 1)
//	acceptor v1:    1 | uvarint instance | ballot promised | ballot accepted |
//	                bool hasValue | [epoch value]
//	learned v1:     1 | epoch | ballot cert.Ballot | members cert.Acceptors |
//	                epoch cert.Prev
//	gate-passed v1: 1 | uvarint epochNumber
//	counter v1:     1 | uvarint counter (>= 1)
//
//	ballot  = uvarint counter | str node
//	epoch   = uvarint number | uvarint caps.ring | members
//	members = uvarint count | count × (str id | fixed64 store | str addr |
//	          uvarint version)
//
// Records whose key holds a number (acceptor, gate-passed) repeat it in the
// value, so a value under the wrong key is caught as corruption.
const (
	identityV1    byte = 1
	incarnationV1 byte = 1
	acceptorV1    byte = 1
	learnedV1     byte = 1
	gatePassedV1  byte = 1
	counterV1     byte = 1
)

func encodeIdentity(id Identity) []byte {
	e := encoder{b: []byte{identityV1}}
	e.str(string(id.NodeID))
	e.fixed64(id.StoreID)
	e.str(id.ClusterID)
	return e.b
}

func decodeIdentity(b []byte) (Identity, error) {
	d := decoder{b: b}
	d.version(identityV1)
	id := Identity{NodeID: msg.NodeID(d.str()), StoreID: d.fixed64(), ClusterID: d.str()}
	if err := d.finish(); err != nil {
		return Identity{}, fmt.Errorf("identity: %w", err)
	}
	if err := id.check(); err != nil {
		return Identity{}, fmt.Errorf("identity: %w", err)
	}
	return id, nil
}

func (id Identity) check() error {
	switch {
	case id.NodeID == "":
		return errors.New("empty node ID")
	case id.ClusterID == "":
		return errors.New("empty cluster ID")
	case id.StoreID == 0:
		return errors.New("zero store ID")
	}
	return nil
}

func encodeIncarnation(inc uint64) []byte {
	e := encoder{b: []byte{incarnationV1}}
	e.uvarint(inc)
	return e.b
}

func decodeIncarnation(b []byte) (uint64, error) {
	d := decoder{b: b}
	d.version(incarnationV1)
	inc := d.uvarint()
	if err := d.finish(); err != nil {
		return 0, fmt.Errorf("incarnation: %w", err)
	}
	if inc == 0 {
		// 0 is "never started"; it is represented by the key's absence.
		return 0, errors.New("incarnation: zero")
	}
	return inc, nil
}

// checkAcceptor enforces the one rule records.go states for the record: a
// value exists exactly when a ballot was accepted.
func checkAcceptor(r epoch.AcceptorRecord) error {
	if r.Accepted.IsZero() != (r.Value == nil) {
		return fmt.Errorf("acceptor record for instance %d: accepted ballot %+v with value present=%t",
			r.Instance, r.Accepted, r.Value != nil)
	}
	return nil
}

func encodeAcceptor(r epoch.AcceptorRecord) ([]byte, error) {
	if err := checkAcceptor(r); err != nil {
		return nil, err
	}
	e := encoder{b: []byte{acceptorV1}}
	e.uvarint(r.Instance)
	e.ballot(r.Promised)
	e.ballot(r.Accepted)
	e.bool(r.Value != nil)
	if r.Value != nil {
		e.epoch(*r.Value)
	}
	return e.b, nil
}

func decodeAcceptor(b []byte) (epoch.AcceptorRecord, error) {
	d := decoder{b: b}
	d.version(acceptorV1)
	r := epoch.AcceptorRecord{Instance: d.uvarint(), Promised: d.ballot(), Accepted: d.ballot()}
	if d.bool() {
		v := d.epoch()
		r.Value = &v
	}
	if err := d.finish(); err != nil {
		return epoch.AcceptorRecord{}, fmt.Errorf("acceptor record: %w", err)
	}
	if err := checkAcceptor(r); err != nil {
		return epoch.AcceptorRecord{}, err
	}
	return r, nil
}

func encodeLearned(l epoch.Learned) []byte {
	e := encoder{b: []byte{learnedV1}}
	e.epoch(l.Epoch)
	e.ballot(l.Cert.Ballot)
	e.members(l.Cert.Acceptors)
	e.epoch(l.Cert.Prev)
	return e.b
}

func decodeLearned(b []byte) (epoch.Learned, error) {
	d := decoder{b: b}
	d.version(learnedV1)
	var l epoch.Learned
	l.Epoch = d.epoch()
	l.Cert.Ballot = d.ballot()
	l.Cert.Acceptors = d.members()
	l.Cert.Prev = d.epoch()
	if err := d.finish(); err != nil {
		return epoch.Learned{}, fmt.Errorf("learned epoch: %w", err)
	}
	return l, nil
}

func encodeGatePassed(epochNumber uint64) []byte {
	e := encoder{b: []byte{gatePassedV1}}
	e.uvarint(epochNumber)
	return e.b
}

func decodeGatePassed(b []byte) (uint64, error) {
	d := decoder{b: b}
	d.version(gatePassedV1)
	n := d.uvarint()
	if err := d.finish(); err != nil {
		return 0, fmt.Errorf("gate-passed marker: %w", err)
	}
	return n, nil
}

func encodeCounter(n uint64) []byte {
	e := encoder{b: []byte{counterV1}}
	e.uvarint(n)
	return e.b
}

func decodeCounter(b []byte) (uint64, error) {
	d := decoder{b: b}
	d.version(counterV1)
	n := d.uvarint()
	if err := d.finish(); err != nil {
		return 0, fmt.Errorf("write counter: %w", err)
	}
	if n == 0 {
		// The first write stores 1; 0 is the key's absence.
		return 0, errors.New("write counter: zero")
	}
	return n, nil
}
