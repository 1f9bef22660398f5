package embedetcd_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/tenure-dev/tenure/coordinator/store/embedetcd"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// childDirEnv makes the test binary an embedded etcd on the data dir it
// names (child), for a test that needs the data dir held by another
// process.
const childDirEnv = "TENURE_EMBEDETCD_CHILD_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(childDirEnv); dir != "" {
		os.Exit(child(dir))
	}
	os.Exit(testenv.CheckLeaks(m.Run()))
}

// child starts an embedded etcd in dir, prints "started" and waits to be
// killed.
func child(dir string) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := embedetcd.Start(ctx, dir, zap.NewNop()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("started")
	<-ctx.Done()
	return 1
}

// startEmbedded starts an embedded etcd in dir, stopped when t ends.
func startEmbedded(t *testing.T, dir string, log *zap.Logger) *embedetcd.Etcd {
	t.Helper()
	e, err := embedetcd.Start(testenv.Context(t), dir, log)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func testLogger(t testing.TB) *zap.Logger {
	if tt, ok := t.(*testing.T); ok {
		return zaptest.NewLogger(tt, zaptest.Level(zap.WarnLevel))
	}
	return zap.NewNop()
}
