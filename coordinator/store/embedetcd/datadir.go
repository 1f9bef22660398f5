package embedetcd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/client/pkg/v3/fileutil"
)

// Errors of Start for a data dir it cannot use.
var (
	// ErrDataDirInUse is returned when another process (or another
	// Etcd of this one) runs on the data dir. etcd would wait for
	// the database's file lock forever, saying nothing.
	ErrDataDirInUse = errors.New("embedetcd: the data dir is in use")
	// ErrNotDataDir is returned for a directory that holds files but
	// no etcd data: a mistyped path, which etcd would fill beside them.
	ErrNotDataDir = errors.New("embedetcd: not a data dir")
	// ErrCorruptDataDir is returned when the data dir's database cannot
	// be opened; etcd would panic in a goroutine of its own.
	ErrCorruptDataDir = errors.New("embedetcd: the data dir's database is damaged")
)

// lockFileName is the file in a data dir that the process running on it
// holds a lock on, with its PID, for the next one to name.
const lockFileName = "tenure.lock"

// dataDirEntries are the names a data dir may hold: etcd's member
// directory, the lock file, and the directory fsck keeps at the root of
// a file system (a data dir that is a volume of its own).
var dataDirEntries = []string{"member", lockFileName, "lost+found"}

// checkDataDirEntries refuses a directory that holds anything but what a
// data dir holds. A missing or empty one is a new data dir.
func checkDataDirEntries(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("embedetcd: data dir: %w", err)
	}
	var foreign []string
	for _, e := range entries {
		if !slices.Contains(dataDirEntries, e.Name()) {
			foreign = append(foreign, e.Name())
		}
	}
	if len(foreign) == 0 {
		return nil
	}
	shown := foreign
	if len(shown) > 3 {
		shown = append(shown[:3:3], "...")
	}
	return fmt.Errorf("%w: %s holds %s and no etcd data: give a new or empty directory, or the data dir of an earlier run (it holds only %s)",
		ErrNotDataDir, dir, strings.Join(shown, ", "), strings.Join(dataDirEntries[:2], " and "))
}

// heldLocks keeps each locked data dir's lock file reachable until Close
// releases it: an Etcd dropped without Close still runs its etcd
// server, which must keep the data dir, and a collected *os.File would
// close, and release, the lock.
var heldLocks sync.Map // *fileutil.LockedFile -> struct{}

// lockDataDir takes the data dir's lock, without waiting, and writes this
// process's PID into the lock file. The lock is released when the
// returned file is closed, or when the process exits, however it exits.
func lockDataDir(dir string) (*fileutil.LockedFile, error) {
	path := filepath.Join(dir, lockFileName)
	f, err := fileutil.TryLockFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if errors.Is(err, fileutil.ErrLocked) {
		holder := "another process"
		if b, rerr := os.ReadFile(path); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
				holder = fmt.Sprintf("process %d", pid)
				if pid == os.Getpid() {
					holder = "this process"
				}
			}
		}
		return nil, fmt.Errorf("%w: %s is used by %s: stop it, or give this one another data dir", ErrDataDirInUse, dir, holder)
	}
	if err != nil {
		return nil, fmt.Errorf("embedetcd: locking data dir %s: %w", dir, err)
	}
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("embedetcd: locking data dir %s: %w", dir, err)
	}
	heldLocks.Store(f, struct{}{})
	return f, nil
}

// unlockDataDir releases a lock of lockDataDir.
func unlockDataDir(f *fileutil.LockedFile) {
	heldLocks.Delete(f)
	f.Close()
}

// checkDatabase opens the data dir's database, if it has one, as etcd is
// about to, and says what is wrong with it if it cannot be opened: etcd
// panics on it in a goroutine of its own, with a stack dump and no
// advice. The caller holds the data dir's lock, so nothing else has the
// database open.
func checkDatabase(dir string) (err error) {
	path := filepath.Join(dir, "member", "snap", "db")
	if _, serr := os.Stat(path); errors.Is(serr, os.ErrNotExist) {
		return nil
	}
	defer func() {
		// bbolt panics on some damage it finds while reading the meta
		// pages rather than returning an error.
		if r := recover(); r != nil {
			err = corruptError(dir, path, fmt.Errorf("%v", r))
		}
	}()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return corruptError(dir, path, err)
	}
	return db.Close()
}

func corruptError(dir, path string, err error) error {
	return fmt.Errorf("%w: %s: %v. Restore the data dir from a backup (etcdutl snapshot restore), "+
		"or, in an etcd cluster of several members, replace this member (etcdctl member remove, then member add and "+
		"start it on an empty data dir); to start afresh with no state, move %s away", ErrCorruptDataDir, path, err, dir)
}
