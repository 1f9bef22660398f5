package testenv

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// testOnly are the packages that only tests may import: they start
// servers, skip tests and link an etcd server into whatever imports them.
var testOnly = []string{
	"github.com/tenure-dev/tenure/internal/testenv",
	"github.com/tenure-dev/tenure/internal/proctest",
	"github.com/tenure-dev/tenure/internal/testgroups",
	"github.com/tenure-dev/tenure/internal/benchcpu",
	"github.com/tenure-dev/tenure/epoch/internal/fencetest",
}

// TestOnlyTestsImport fails if any non-test Go file of the module imports
// a test-only package.
func TestOnlyTestsImport(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, only := range testOnly {
				if p == only {
					t.Errorf("%s imports %s, which only tests may import", path, p)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("checked only %d files under %s; is the module root right?", checked, root)
	}
}
