package localstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// The write counter is how a store notices that Pebble lost writes it had
// synced (S4). Pebble cannot tell a WAL that lost synced records (truncated,
// or damaged so that replay stops early) from one whose unsynced tail was torn
// by a crash: both end early, and Pebble recovers to the last record it can
// read. So every batch localstore writes also sets counterKey to one more than
// the last, and after Pebble's sync the same number is written, synced, into
// a small file of its own beside the database. Only then does the write
// return. At Open the two must agree, up to the one write a crash may have
// left in between:
//
//	file = db      clean
//	file = db - 1  a crash after Pebble's sync, before the file's: that write
//	               was never acknowledged; Open brings the file up to it
//	file > db      Pebble lost acknowledged writes: refuse
//	file < db - 1  the file was rolled back or replaced: refuse
//
// The file has two fixed-size slots, one sector each and a block apart, and
// write n goes to slot n%2: a crash that tears the slot being written leaves
// the other, one write older, which the rule above accepts. Each slot:
//
//	"HLCOUNT" | version 1 | fixed64 storeID | fixed64 counter | crc32c(previous 24 bytes) | 4 zero bytes
//
// The store ID binds the file to its database, so a file copied from another
// store is refused rather than trusted.
const (
	counterFileName = "HOMELOCK-COUNTER"
	counterSlotLen  = 32
	// counterSlotStride keeps the slots in different blocks, so that no
	// single torn block write can damage both.
	counterSlotStride = 4096
	counterFileLen    = counterSlotStride + counterSlotLen
)

var (
	counterMagic = [8]byte{'H', 'L', 'C', 'O', 'U', 'N', 'T', 1}
	castagnoli   = crc32.MakeTable(crc32.Castagnoli)
)

func encodeCounterSlot(storeID, counter uint64) []byte {
	b := make([]byte, 0, counterSlotLen)
	b = append(b, counterMagic[:]...)
	b = binary.BigEndian.AppendUint64(b, storeID)
	b = binary.BigEndian.AppendUint64(b, counter)
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	return append(b, 0, 0, 0, 0)
}

// decodeCounterSlot accepts exactly what encodeCounterSlot writes.
func decodeCounterSlot(b []byte) (storeID, counter uint64, err error) {
	switch {
	case len(b) != counterSlotLen:
		return 0, 0, fmt.Errorf("slot is %d bytes, want %d", len(b), counterSlotLen)
	case [8]byte(b[:8]) != counterMagic:
		return 0, 0, errors.New("bad magic or version")
	case binary.BigEndian.Uint32(b[24:28]) != crc32.Checksum(b[:24], castagnoli):
		return 0, 0, errors.New("checksum mismatch")
	case binary.BigEndian.Uint32(b[28:]) != 0:
		return 0, 0, errors.New("non-zero padding")
	}
	return binary.BigEndian.Uint64(b[8:16]), binary.BigEndian.Uint64(b[16:24]), nil
}

// counterState is what Open read from the counter file.
type counterState struct {
	exists bool
	// acked is the highest counter in a valid slot; 0 if none.
	acked uint64
	// damaged lists why slots were unreadable, for the error message.
	damaged []string
}

// readCounterFile reads both slots. A slot that fails its checksum is left
// out (a crash may have torn it); a valid slot of another store, or in the
// wrong slot for its number, is corruption, not a crash. storeID 0 (not
// known) matches every store.
func readCounterFile(fsys vfs.FS, path string, storeID uint64) (counterState, error) {
	f, err := fsys.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return counterState{}, nil
	}
	if err != nil {
		return counterState{}, err
	}
	defer f.Close()
	st := counterState{exists: true}
	for slot := range 2 {
		b := make([]byte, counterSlotLen)
		n, err := f.ReadAt(b, int64(slot*counterSlotStride))
		if err != nil && !errors.Is(err, io.EOF) {
			return counterState{}, err
		}
		id, c, err := decodeCounterSlot(b[:n])
		if err != nil {
			st.damaged = append(st.damaged, fmt.Sprintf("slot %d: %v", slot, err))
			continue
		}
		if storeID != 0 && id != storeID {
			return counterState{}, fmt.Errorf("%w: %q slot %d belongs to store %016x, the database is store %016x",
				errCounterForeign, path, slot, id, storeID)
		}
		if c%2 != uint64(slot) {
			return counterState{}, fmt.Errorf("%w: %q slot %d holds counter %d, which belongs in slot %d",
				errCounterForeign, path, slot, c, c%2)
		}
		st.acked = max(st.acked, c)
	}
	return st, nil
}

var errCounterForeign = errors.New("counter file does not match the database")

// checkCounter applies the table above: db is the counter Pebble holds.
func checkCounter(path string, db uint64, st counterState) error {
	switch {
	case db < st.acked:
		return fmt.Errorf("the database holds write %d but write %d was acknowledged (%s): "+
			"Pebble lost synced writes (a truncated or damaged WAL, or a database restored without its counter file)",
			db, st.acked, path)
	case db <= st.acked+1:
		return nil
	case !st.exists:
		return fmt.Errorf("the counter file %s is missing but the database holds write %d", path, db)
	case st.acked == 0:
		return fmt.Errorf("the counter file %s has no readable slot (%v) but the database holds write %d", path, st.damaged, db)
	default:
		return fmt.Errorf("the counter file %s acknowledges write %d but the database holds write %d: "+
			"the counter file was rolled back or replaced", path, st.acked, db)
	}
}

// openCounterFile opens the counter file for writing, creating it (with no
// valid slot, synced, its directory entry too) if it is missing.
func openCounterFile(fsys vfs.FS, dir string, exists bool) (vfs.File, error) {
	path := fsys.PathJoin(dir, counterFileName)
	f, err := fsys.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, err
	}
	if exists {
		return f, nil
	}
	if _, err = f.WriteAt(make([]byte, counterFileLen), 0); err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = syncDir(fsys, dir)
	}
	if err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return f, nil
}

func syncDir(fsys vfs.FS, dir string) error {
	d, err := fsys.OpenDir(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// writeCounter writes n to its slot and syncs it.
func (s *Store) writeCounter(n uint64) error {
	if _, err := s.counterFile.WriteAt(encodeCounterSlot(s.id.StoreID, n), int64(n%2)*counterSlotStride); err != nil {
		return err
	}
	return s.counterFile.SyncData()
}
