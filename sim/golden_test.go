package sim_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/tenure-dev/tenure/sim"
)

var updateGolden = flag.Bool("golden.update", false, "rewrite sim/testdata/golden/ from this build's runs")

// TestGolden pins every built-in scenario's run, seed 7, to the report it
// gave when the file was written: figures, false expulsions, partition 3's
// timeline and the trace hash, which covers every event in order. A change
// to the engine meant only to make it faster must leave these files as
// they are; a change to the cores or to what the simulator models changes
// them on purpose, and then `go test ./sim/ -run TestGolden
// -golden.update` rewrites them (read the diff: it is what the change did
// to the runs).
func TestGolden(t *testing.T) {
	for _, name := range sim.Builtins() {
		t.Run(name, func(t *testing.T) {
			sc := mustBuiltin(t, name)
			rep := run(t, sc, sim.Options{Seed: 7, TimelinePartition: 3})
			var got bytes.Buffer
			if err := rep.WriteText(&got); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "golden", name+".txt")
			if *updateGolden {
				if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (write it with -golden.update)", err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Fatalf("scenario %s seed 7: the report differs from %s (rewrite with -golden.update if the change is meant to change runs)\ngot:\n%s\nwant:\n%s",
					name, path, got.Bytes(), want)
			}
		})
	}
}
