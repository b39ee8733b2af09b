package harness

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func TestSweepDead(t *testing.T) {
	parent := t.TempDir()
	live, _, err := newWorkDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	defer live.remove()
	// A dead run: its lock file is there and nobody holds it.
	dead := filepath.Join(parent, "homelock-harness-dead")
	if err := os.MkdirAll(filepath.Join(dead, "cluster"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dead, workDirLock), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// A run still making its directory has no lock file yet.
	young := filepath.Join(parent, "homelock-harness-young")
	if err := os.Mkdir(young, 0o700); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(parent, "not-the-harness")
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}

	next, removed, err := newWorkDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(removed, []string{dead}) {
		t.Errorf("removed %v, want only %s", removed, dead)
	}
	for _, d := range []string{live.path, young, other, next.path} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s: %v, want it kept", d, err)
		}
	}
	if err := next.remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(next.path); !os.IsNotExist(err) {
		t.Errorf("%s after remove: %v, want it gone", next.path, err)
	}
}

func TestStoreWritesLeavesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	rates, err := storeWrites(context.Background(), dir, 80*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(rates) != storeWindows {
		t.Errorf("%d windows, want %d", len(rates), storeWindows)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("store directory after the sample: %v, want it gone", err)
	}
}

// On tmpfs a preallocated block is RAM: Pebble asks for 110% of its
// memtable at every WAL, and the store sample must not get it.
func TestNoPreallocAllocatesNothing(t *testing.T) {
	fs := noPrealloc{vfs.Default}
	path := filepath.Join(t.TempDir(), "wal")
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Preallocate(0, 64<<20); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	if st.Blocks != 0 {
		t.Errorf("%d blocks allocated, want 0", st.Blocks)
	}
}
