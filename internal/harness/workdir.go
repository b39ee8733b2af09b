package harness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// workDir is a run's temporary directory. The run holds an exclusive flock on
// its lock file for as long as it lives, and the kernel drops that lock when
// the process dies however it dies: a directory whose lock can be taken is a
// dead run's leftovers (a run killed by SIGKILL or the OOM killer cannot clean
// up after itself), and the next run removes it.
type workDir struct {
	path string
	lock *os.File
}

const (
	workDirPattern = "homelock-harness-*"
	workDirLock    = ".lock"
)

// workParent is where work directories go: dir, else tmpfs if any, so that
// the store's synced writes measure the lock and not this machine's disk.
func workParent(dir string) string {
	if dir != "" {
		return dir
	}
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		return "/dev/shm"
	}
	return os.TempDir()
}

// newWorkDir removes the leftovers of dead runs in parent, then makes and
// locks a fresh directory there. It returns the leftovers it removed.
func newWorkDir(parent string) (*workDir, []string, error) {
	removed := sweepDead(parent)
	path, err := os.MkdirTemp(parent, workDirPattern)
	if err != nil {
		return nil, removed, err
	}
	f, err := lockFile(filepath.Join(path, workDirLock))
	if err != nil {
		return nil, removed, errors.Join(err, os.RemoveAll(path))
	}
	return &workDir{path: path, lock: f}, removed, nil
}

// lockFile creates path holding an exclusive flock. The file is locked under
// another name and renamed into place (the lock follows the inode), so that a
// sweep never finds it unlocked while its run is alive.
func lockFile(path string) (*os.File, error) {
	tmp := path + ".new"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// sweepDead removes every work directory in parent whose lock file exists and
// is not locked. A directory without one (being created, or left by a harness
// older than the lock) is not touched.
func sweepDead(parent string) []string {
	dirs, _ := filepath.Glob(filepath.Join(parent, workDirPattern))
	var removed []string
	for _, d := range dirs {
		f, err := os.OpenFile(filepath.Join(d, workDirLock), os.O_RDWR, 0)
		if err != nil {
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil && os.RemoveAll(d) == nil {
			removed = append(removed, d)
		}
		f.Close()
	}
	return removed
}

// sub is a phase's directory inside the work directory.
func (w *workDir) sub(name string) string { return filepath.Join(w.path, name) }

// remove deletes the directory, then lets its lock go.
func (w *workDir) remove() error {
	err := os.RemoveAll(w.path)
	return errors.Join(err, w.lock.Close())
}

// startWorkDir is a run's data directory under dir (workParent), once the
// dead runs' there are removed, each told to progress.
func startWorkDir(dir string, progress func(string)) (*workDir, error) {
	wd, swept, err := newWorkDir(workParent(dir))
	for _, d := range swept {
		progress("removed a dead run's data: " + d)
	}
	return wd, err
}
