package localstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// pidFileName names the file in which the process holding the directory lock
// writes its pid, so that a second node can say whom it found there. It is
// informative only: the lock itself is Pebble's LOCK file.
const pidFileName = "HOMELOCK-PID"

// lockDir takes Pebble's directory lock before anything in dir is read, so
// that two nodes never look at (or create) the same store at once. The store
// passes the lock to pebble.Open and releases it after the database closed.
func lockDir(fsys vfs.FS, dir string) (*pebble.Lock, error) {
	l, err := pebble.LockDirectory(dir, fsys)
	if err == nil {
		writePid(fsys, dir)
		return l, nil
	}
	if !lockHeld(err) {
		return nil, fmt.Errorf("localstore: lock %q: %w", dir, err)
	}
	who := "pid unknown"
	if pid := readPid(fsys, dir); pid == os.Getpid() {
		who = fmt.Sprintf("pid %d, this process", pid)
	} else if pid > 0 {
		who = fmt.Sprintf("pid %d", pid)
	}
	return nil, fmt.Errorf("%w: data dir %q is in use by another homelock node (%s); stop it, or give this node another data dir",
		ErrDataDirInUse, dir, who)
}

// lockHeld reports whether err says the lock is held rather than that the
// lock file could not be made: fcntl answers EAGAIN or EACCES for a lock held
// by another process (a failed create is a *PathError instead), Pebble's
// MemFS mimics EAGAIN, and the OS file system refuses a second lock within
// one process with a message of its own (fcntl locks cannot see that case).
func lockHeld(err error) bool {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return false
	}
	return errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) ||
		strings.Contains(err.Error(), "lock held by current process")
}

// writePid records this process as the lock holder. A failure only costs
// the pid in another node's error message, so it is not one.
func writePid(fsys vfs.FS, dir string) {
	f, err := fsys.Create(fsys.PathJoin(dir, pidFileName), vfs.WriteCategoryUnspecified)
	if err != nil {
		return
	}
	_, _ = f.Write([]byte(strconv.Itoa(os.Getpid()) + "\n"))
	_ = f.Close()
}

// readPid returns the pid in dir's pid file, or 0. Between a holder taking
// the lock and writing its pid the file may still name the previous holder.
func readPid(fsys vfs.FS, dir string) int {
	f, err := fsys.Open(fsys.PathJoin(dir, pidFileName))
	if err != nil {
		return 0
	}
	defer f.Close()
	b := make([]byte, 32)
	n, _ := f.Read(b)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// makeDir creates dir and its missing parents, syncing each new entry into
// its parent (else a crash could lose the directory a synced store lives in),
// and returns the topmost directory it created, "" if dir existed: what a
// failed first start removes.
func makeDir(fsys vfs.FS, dir string) (string, error) {
	var made []string
	for d := dir; ; {
		if _, err := fsys.Stat(d); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		made = append(made, d)
		parent := fsys.PathDir(d)
		if parent == d {
			break
		}
		d = parent
	}
	if len(made) == 0 {
		return "", nil
	}
	top := made[len(made)-1]
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return top, err
	}
	for _, d := range made {
		if err := syncDir(fsys, fsys.PathDir(d)); err != nil {
			return top, err
		}
	}
	return top, nil
}

// isEmptyDir reports whether dir holds nothing but the lock and pid files,
// which Open itself writes before it looks.
func isEmptyDir(fsys vfs.FS, dir string) (bool, error) {
	names, err := fsys.List(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	for _, n := range names {
		if n != "LOCK" && n != pidFileName {
			return false, nil
		}
	}
	return true, nil
}
