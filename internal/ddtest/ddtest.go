// Package ddtest runs datadriven test scripts.
package ddtest

import (
	"path/filepath"
	"strings"
	"testing"
)

// Walk runs f on every testdata/*.txt script as a subtest named after the
// file. Unlike datadriven.Walk it does not descend into subdirectories such
// as testdata/rapid, where rapid keeps the inputs of failed property tests.
func Walk(t *testing.T, f func(t *testing.T, path string)) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no scripts in testdata: %v", err)
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) { f(t, path) })
	}
}
