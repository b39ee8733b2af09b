package localstore

import (
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/homelock/homelock/epoch"
)

// failingFS makes every sync of the files it creates fail while fail is set.
type failingFS struct {
	*crashFS
	fail atomic.Bool
}

var errDisk = errors.New("disk on fire")

func (f *failingFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.Create(name, c)
	return failingFile{file, f}, err
}

func (f *failingFS) ReuseForWrite(old, name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.ReuseForWrite(old, name, c)
	return failingFile{file, f}, err
}

type failingFile struct {
	vfs.File
	fs *failingFS
}

func (f failingFile) Sync() error {
	if f.fs.fail.Load() {
		return errDisk
	}
	return f.File.Sync()
}

func (f failingFile) SyncData() error { return f.Sync() }

// Pebble treats a failed WAL sync as fatal (its commit pipeline cannot
// continue), and the store's logger turns Pebble's Fatalf into a panic: a
// Commit whose sync failed never returns, so nothing is acknowledged and no
// reply leaves. Pebble's default logger would exit the process instead.
func TestFailedSyncNeverAcknowledges(t *testing.T) {
	fs := &failingFS{crashFS: newCrashFS(vfs.NewCrashableMem(), rand.New(rand.NewPCG(1, 1)))}
	s, err := Open(testDir, testOptions(fs))
	noErr(t, err)
	fs.fail.Store(true)
	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Fatal("Commit returned after its sync failed")
			}
		}()
		err = s.Commit(Writes{Acceptor: []epoch.AcceptorRecord{promise(1, 1)}})
		t.Fatalf("Commit returned %v after its sync failed", err)
	}()
	fs.fail.Store(false)
	_ = s.Close()
}
