package readme

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLibStopsShown: a reader pastes an example's commands in order, so
// whatever the example starts, a command it shows must stop; the helpers
// fail a script that leaves a started process running, and pass one that
// stops its processes itself.
func TestLibStopsShown(t *testing.T) {
	lib, err := filepath.Abs(filepath.Join(root, "docs", "examples", "lib.sh"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		name, body, want string
	}{
		{"left running", "start sleeper 'sleep 30'\n", "sleeper still runs after the last command"},
		{"stopped by a shown command", "start sleeper 'sleep 30'\nrun 'kill %1; wait'\n", ""},
		{"nothing started", "run 'true'\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			script := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".sh")
			if err := os.WriteFile(script, []byte(". "+lib+"\n"+tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("bash", script)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("%v\n%s", err, out)
				}
				return
			}
			if err == nil || !strings.Contains(string(out), tc.want) {
				t.Fatalf("err %v, output %q: want a failure saying %q", err, out, tc.want)
			}
		})
	}
}
