package localstore

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
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
// continue), and the store's logger then crashes the process: a Commit whose
// sync failed never returns, so nothing is acknowledged and no reply leaves,
// and no deferred code of its caller runs (which, holding the node's locks,
// could hang it instead). The child process is the store's user.
func TestFailedSyncCrashes(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestFailedSyncChild$")
	cmd.Env = append(os.Environ(), failedSyncEnv+"=1")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("child exited with %v, want status 2 (an unrecovered panic):\n%s", err, out)
	}
	for _, want := range []string{"committing", "panic: pebble fatal error", errDisk.Error()} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("child's output lacks %q:\n%s", want, out)
		}
	}
	for _, never := range []string{"acknowledged", "deferred cleanup ran"} {
		if strings.Contains(string(out), never) {
			t.Fatalf("child's output has %q:\n%s", never, out)
		}
	}
}

// failedSyncEnv makes the test binary, run as a child, commit through a
// failing sync.
const failedSyncEnv = "LOCALSTORE_TEST_FAILED_SYNC"

func TestFailedSyncChild(t *testing.T) {
	if os.Getenv(failedSyncEnv) == "" {
		t.Skip("only runs as the child of TestFailedSyncCrashes")
	}
	fs := &failingFS{crashFS: newCrashFS(vfs.NewCrashableMem(), rand.New(rand.NewPCG(1, 1)))}
	s, err := Open(testDir, testOptions(fs))
	noErr(t, err)
	fs.fail.Store(true)
	defer fmt.Println("deferred cleanup ran")
	fmt.Println("committing")
	err = s.Commit(Writes{Acceptor: []epoch.AcceptorRecord{promise(1, 1)}})
	fmt.Println("acknowledged:", err)
}

// A disk that fails while Pebble creates its database (a full disk at a
// node's first start) makes Pebble call Fatalf inside Open. Open returns
// that as an error wrapping the disk's, and leaves nothing behind: the same
// directory opens as a fresh store once the disk works.
func TestOpenOnFailingDisk(t *testing.T) {
	fs := &failingFS{crashFS: newCrashFS(vfs.NewCrashableMem(), rand.New(rand.NewPCG(1, 1)))}
	fs.fail.Store(true)
	_, err := Open(testDir, testOptions(fs))
	isErr(t, err, errDisk)
	errContains(t, err, testDir, "pebble fatal error", errDisk.Error())
	fs.fail.Store(false)
	s, err := Open(testDir, testOptions(fs))
	noErr(t, err)
	noErr(t, s.Close())
}
