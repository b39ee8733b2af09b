package localstore

import "encoding/binary"

// Key prefixes: the first byte of every key says which record kind it holds.
// The numbering is part of the on-disk format: never renumber, only add.
// First bytes below ownedEnd belong to localstore; guardPrefix belongs to
// fence.Guard, which shares the Pebble DB.
const (
	prefixIdentity    byte = 0x01 // single key
	prefixIncarnation byte = 0x02 // single key
	prefixAcceptor    byte = 0x03 // + instance, 8 bytes big-endian
	prefixLearned     byte = 0x04 // single key
	prefixGatePassed  byte = 0x05 // + epoch number, 8 bytes big-endian
	prefixCounter     byte = 0x06 // single key: the write counter (S4)
	prefixGossip      byte = 0x07 // single key

	// ownedEnd bounds localstore's key space: Open reads every key below it
	// and refuses any it does not know, so a newer build's records are never
	// mistaken for absence by an older one.
	ownedEnd byte = 0x80

	guardPrefix byte = 0x80
)

var (
	identityKey    = []byte{prefixIdentity}
	incarnationKey = []byte{prefixIncarnation}
	learnedKey     = []byte{prefixLearned}
	counterKey     = []byte{prefixCounter}
	gossipKey      = []byte{prefixGossip}
)

func numberedKey(prefix byte, n uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{prefix}, n)
}

func acceptorKey(instance uint64) []byte { return numberedKey(prefixAcceptor, instance) }

func gatePassedKey(epochNumber uint64) []byte { return numberedKey(prefixGatePassed, epochNumber) }

// parseNumberedKey returns the number in a key made by numberedKey.
func parseNumberedKey(prefix byte, k []byte) (uint64, bool) {
	if len(k) != 9 || k[0] != prefix {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[1:]), true
}
