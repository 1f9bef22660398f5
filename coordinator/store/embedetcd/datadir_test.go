package embedetcd_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/coordinator/store/embedetcd"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// startWithin runs Start on dir and fails t if it does not return
// within a minute: etcd waits for its database's file lock forever.
func startWithin(t *testing.T, dir string) (*embedetcd.Etcd, error) {
	t.Helper()
	type started struct {
		e   *embedetcd.Etcd
		err error
	}
	done := make(chan started, 1)
	go func() {
		e, err := embedetcd.Start(testenv.Context(t), dir, testLogger(t))
		done <- started{e, err}
	}()
	select {
	case s := <-done:
		if s.e != nil {
			t.Cleanup(func() { s.e.Close() })
		}
		return s.e, s.err
	case <-time.After(time.Minute):
		t.Fatalf("Start on %s has not returned after a minute", dir)
		return nil, nil
	}
}

// TestDataDirInUse starts a second embedded etcd on the data dir of a
// running one, in this process and in another: it is refused at once,
// naming the directory and who holds it.
func TestDataDirInUse(t *testing.T) {
	dir := t.TempDir()
	startEmbedded(t, dir, testLogger(t))
	_, err := startWithin(t, dir)
	if !errors.Is(err, embedetcd.ErrDataDirInUse) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "this process") {
		t.Fatalf("second start in this process: %v; want ErrDataDirInUse naming %s and this process", err, dir)
	}

	other := t.TempDir()
	cmd, lines := testenv.StartChild(t, childDirEnv, other)
	defer cmd.Wait()
	defer cmd.Process.Kill()
	for lines.Scan() && lines.Text() != "started" {
	}
	_, err = startWithin(t, other)
	if want := fmt.Sprintf("process %d", cmd.Process.Pid); !errors.Is(err, embedetcd.ErrDataDirInUse) || !strings.Contains(err.Error(), want) {
		t.Fatalf("start beside another process: %v; want ErrDataDirInUse naming %s", err, want)
	}

	cmd.Process.Kill() // the lock goes with the process, however it ends
	cmd.Wait()
	if _, err := startWithin(t, other); err != nil {
		t.Fatalf("start after the holder was killed: %v", err)
	}
}

// TestDataDirNotOurs refuses a directory that holds other files, and
// leaves them alone.
func TestDataDirNotOurs(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := startWithin(t, dir)
	if !errors.Is(err, embedetcd.ErrNotDataDir) || !strings.Contains(err.Error(), "notes.txt") {
		t.Fatalf("start on a directory of other files: %v; want ErrNotDataDir naming notes.txt", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("the refused directory holds %d entries, want the one it had", len(entries))
	}
}

// TestDataDirCorrupt damages the database of a stopped data dir: the next
// start says so and what to do, instead of etcd's panic.
func TestDataDirCorrupt(t *testing.T) {
	dir := t.TempDir()
	e, err := embedetcd.Start(testenv.Context(t), dir, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	db := filepath.Join(dir, "member", "snap", "db")
	if err := os.WriteFile(db, []byte(strings.Repeat("not a database ", 1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = startWithin(t, dir)
	if !errors.Is(err, embedetcd.ErrCorruptDataDir) || !strings.Contains(err.Error(), db) || !strings.Contains(err.Error(), "backup") {
		t.Fatalf("start on a damaged database: %v; want ErrCorruptDataDir naming %s and what to do", err, db)
	}
}
