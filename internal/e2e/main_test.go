package e2e

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/tenure-dev/tenure/internal/proctest"
)

// The package's tests run in parallel (t.Parallel, -parallel at most
// GOMAXPROCS at once): most of their time is spent waiting for sessions,
// TTLs and fail-overs to play out, so two overlap on two cores. Each runs
// its own processes on free loopback ports, in its own directories.

// binDir holds the binaries the tests share, built once each: two tests
// starting at once would otherwise both compile tenure from a cold cache.
var binDir string

// built is each package's binary: *builtBin by package path.
var built sync.Map

type builtBin struct {
	once sync.Once
	path string
	err  error
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tenure-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// build returns the binaries of pkgs (see proctest.Build), building each
// the first time a test asks for it.
func build(t testing.TB, pkgs ...string) []string {
	t.Helper()
	var bins []string
	for _, pkg := range pkgs {
		v, _ := built.LoadOrStore(pkg, new(builtBin))
		b := v.(*builtBin)
		b.once.Do(func() { b.path, b.err = proctest.BuildInto(binDir, pkg) })
		if b.err != nil {
			t.Fatal(b.err)
		}
		bins = append(bins, b.path)
	}
	return bins
}
