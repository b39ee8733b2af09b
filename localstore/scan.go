package localstore

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/homelock/homelock/epoch"
)

// contents is everything in localstore's key space, decoded.
type contents struct {
	records     int
	identity    *Identity
	incarnation uint64
	acceptor    []epoch.AcceptorRecord
	learned     *epoch.Learned
	gatePassed  []uint64
	// counter is the write counter (S4); 0 if the key is absent.
	counter uint64
}

// scan reads and decodes every key below ownedEnd. Any key or value it cannot
// decode, including a key kind it does not know, is ErrCorrupt.
func (s *Store) scan() (contents, error) {
	var c contents
	it, err := s.db.NewIter(&pebble.IterOptions{UpperBound: []byte{ownedEnd}})
	if err != nil {
		return c, s.readErr(err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		c.records++
		k := it.Key()
		v, err := it.ValueAndErr()
		if err == nil {
			err = c.add(k, v)
		}
		if err != nil {
			return c, s.corrupt(fmt.Errorf("key %x: %w", k, err))
		}
	}
	if err := it.Error(); err != nil {
		return c, s.readErr(err)
	}
	return c, nil
}

func (c *contents) add(k, v []byte) error {
	switch {
	case bytes.Equal(k, identityKey):
		id, err := decodeIdentity(v)
		c.identity = &id
		return err
	case bytes.Equal(k, incarnationKey):
		inc, err := decodeIncarnation(v)
		c.incarnation = inc
		return err
	case bytes.Equal(k, counterKey):
		n, err := decodeCounter(v)
		c.counter = n
		return err
	case bytes.Equal(k, learnedKey):
		l, err := decodeLearned(v)
		c.learned = &l
		return err
	case bytes.Equal(k, gossipKey):
		_, err := decodeGossip(v)
		return err
	}
	if _, ok := parseNumberedKey(prefixAcceptor, k); ok {
		r, err := decodeAcceptorAt(k, v)
		c.acceptor = append(c.acceptor, r)
		return err
	}
	if _, ok := parseNumberedKey(prefixGatePassed, k); ok {
		n, err := decodeGatePassedAt(k, v)
		c.gatePassed = append(c.gatePassed, n)
		return err
	}
	return errors.New("unknown key")
}

// decodeAcceptorAt decodes an acceptor record and checks it is stored under
// its own instance.
func decodeAcceptorAt(k, v []byte) (epoch.AcceptorRecord, error) {
	instance, ok := parseNumberedKey(prefixAcceptor, k)
	if !ok {
		return epoch.AcceptorRecord{}, errors.New("malformed acceptor key")
	}
	r, err := decodeAcceptor(v)
	if err == nil && r.Instance != instance {
		err = fmt.Errorf("acceptor record for instance %d stored under instance %d", r.Instance, instance)
	}
	return r, err
}

func decodeGatePassedAt(k, v []byte) (uint64, error) {
	n, ok := parseNumberedKey(prefixGatePassed, k)
	if !ok {
		return 0, errors.New("malformed gate-passed key")
	}
	got, err := decodeGatePassed(v)
	if err == nil && got != n {
		err = fmt.Errorf("gate-passed marker for epoch %d stored under epoch %d", got, n)
	}
	return n, err
}
