package localstore

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// A second Open of a directory in use fails at once, says so and names the
// holder, and changes nothing: once the holder closes, the store opens.
func TestOpenInUseInProcess(t *testing.T) {
	for _, kind := range []string{"os", "memfs"} {
		t.Run(kind, func(t *testing.T) {
			var fsys vfs.FS = vfs.NewMem()
			dir := testDir
			if kind == "os" {
				fsys, dir = vfs.Default, filepath.Join(t.TempDir(), "node")
			}
			s, err := Open(dir, testOptions(fsys))
			noErr(t, err)
			id := s.Identity()
			_, err = Open(dir, testOptions(fsys))
			isErr(t, err, ErrDataDirInUse)
			errContains(t, err, dir, "is in use by another homelock node", fmt.Sprintf("(pid %d, this process)", os.Getpid()))
			noErr(t, s.Close())

			s, err = Open(dir, testOptions(fsys))
			noErr(t, err)
			eq(t, s.Identity(), id)
			noErr(t, s.Close())
		})
	}
}

// holderEnv makes the test binary, run as a child, hold a store until its
// stdin closes: another process holding the directory.
const holderEnv = "LOCALSTORE_TEST_HOLD_DIR"

func TestHolderProcess(t *testing.T) {
	dir := os.Getenv(holderEnv)
	if dir == "" {
		t.Skip("only runs as the child of TestOpenInUseByAnotherProcess")
	}
	s, err := Open(dir, testOptions(vfs.Default))
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println("holding")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	_ = s.Close()
}

func TestOpenInUseByAnotherProcess(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "node")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHolderProcess$")
	cmd.Env = append(os.Environ(), holderEnv+"="+dir)
	stdin, err := cmd.StdinPipe()
	noErr(t, err)
	stdout, err := cmd.StdoutPipe()
	noErr(t, err)
	noErr(t, cmd.Start())
	defer func() {
		stdin.Close()
		_ = cmd.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	noErr(t, err)
	if strings.TrimSpace(line) != "holding" {
		t.Fatalf("child: %s", line)
	}

	_, err = Open(dir, testOptions(vfs.Default))
	isErr(t, err, ErrDataDirInUse)
	errContains(t, err, dir, fmt.Sprintf("is in use by another homelock node (pid %d)", cmd.Process.Pid))

	noErr(t, stdin.Close())
	noErr(t, cmd.Wait())
	s, err := Open(dir, testOptions(vfs.Default))
	noErr(t, err)
	noErr(t, s.Close())
}

// Discard removes exactly what this Open created: the directories it made,
// or the files it wrote into an empty directory; a store that existed is
// only closed.
func TestDiscard(t *testing.T) {
	root := t.TempDir()
	exists := func(p string) bool {
		_, err := os.Stat(p)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		return err == nil
	}

	// Missing parents: everything from the first missing one goes.
	dir := filepath.Join(root, "a", "b", "node")
	s, err := Open(dir, testOptions(vfs.Default))
	noErr(t, err)
	noErr(t, s.Discard())
	if exists(filepath.Join(root, "a")) {
		t.Fatalf("Discard left %s", filepath.Join(root, "a"))
	}
	isErr(t, s.Discard(), ErrClosed)

	// An empty directory (a mount point, say) stays, empty.
	dir = filepath.Join(root, "empty")
	noErr(t, os.Mkdir(dir, 0o755))
	s, err = Open(dir, testOptions(vfs.Default))
	noErr(t, err)
	noErr(t, s.Discard())
	if names, err := os.ReadDir(dir); err != nil || len(names) != 0 {
		t.Fatalf("Discard left %v (%v) in %s", names, err, dir)
	}

	// A store that existed: closed, kept, same identity.
	dir = filepath.Join(root, "kept")
	s, err = Open(dir, testOptions(vfs.Default))
	noErr(t, err)
	id := s.Identity()
	_, err = s.BumpIncarnation()
	noErr(t, err)
	noErr(t, s.Close())
	s, err = Open(dir, testOptions(vfs.Default))
	noErr(t, err)
	noErr(t, s.Discard())
	s, err = Open(dir, testOptions(vfs.Default))
	noErr(t, err)
	defer s.Close()
	eq(t, s.Identity(), id)
}

// refuseCounterFS fails the creation of the counter file, the last step of
// creating a store.
type refuseCounterFS struct{ vfs.FS }

var errRefused = errors.New("refused by the test")

func (f refuseCounterFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, o ...vfs.OpenOption) (vfs.File, error) {
	if f.PathBase(name) == counterFileName {
		return nil, errRefused
	}
	return f.FS.OpenReadWrite(name, c, o...)
}

// An Open that fails while creating a store removes what it made, so the
// next Open starts from the same empty directory and nothing half-made is
// mistaken for a store.
func TestFailedCreateLeavesNothing(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "x", "node")
	_, err := Open(dir, testOptions(refuseCounterFS{vfs.Default}))
	isErr(t, err, errRefused)
	if _, err := os.Stat(filepath.Join(root, "x")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("failed create left %s (%v)", filepath.Join(root, "x"), err)
	}

	// A failed reopen removes nothing: here the counter file of a store
	// whose first start crashed before writing it cannot be made.
	s, err := Open(dir, testOptions(vfs.Default))
	noErr(t, err)
	id := s.Identity()
	noErr(t, s.Close())
	noErr(t, os.Remove(filepath.Join(dir, counterFileName)))
	_, err = Open(dir, testOptions(refuseCounterFS{vfs.Default}))
	isErr(t, err, errRefused)
	s, err = Open(dir, testOptions(vfs.Default))
	noErr(t, err)
	defer s.Close()
	eq(t, s.Identity(), id)
}

// syncFailCounterFS makes the full sync of the counter file fail, the one
// that makes a new file durable (slot writes use SyncData).
type syncFailCounterFS struct{ vfs.FS }

type syncFailFile struct{ vfs.File }

func (f syncFailFile) Sync() error { return errRefused }

func (f syncFailCounterFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, o ...vfs.OpenOption) (vfs.File, error) {
	file, err := f.FS.OpenReadWrite(name, c, o...)
	if err != nil || f.PathBase(name) != counterFileName {
		return file, err
	}
	return syncFailFile{file}, nil
}

// A counter file that cannot be synced when it is created fails the Open
// (and the failed create leaves nothing): a store whose counter is not
// durable would acknowledge writes it could not later check (S4).
func TestCounterFileSyncFailureFailsOpen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "node")
	_, err := Open(dir, testOptions(syncFailCounterFS{vfs.Default}))
	isErr(t, err, errRefused)
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("failed create left %s (%v)", dir, err)
	}
}
