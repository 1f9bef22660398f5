//go:build unix

// Package readme checks that the examples in tenure's Markdown files show
// what the commands they show print today.
//
// Each example is a script, docs/examples/NAME.sh, and a block in README.md
// or a docs/*.md file:
//
//	<!-- example: NAME -->
//	```console
//	$ bin/tenure sim --scenario gc-pauses --seed 1
//	scenario gc-pauses  seed 1 ...
//	```
//	<!-- /example -->
//
// The script prints every command it runs after "$ " (the run and start
// helpers of docs/examples/lib.sh do it), then the command's output, so
// that its output is the block's body. TestReadme builds bin/tenure, runs
// every script from a directory holding it, and compares the output with
// the block: exactly for a deterministic example, by shape for a live one
// (see compare and script). A block without a script, or a script without
// a block, fails the test.
//
// To add an example:
//
//  1. Write docs/examples/NAME.sh: `. "$(dirname "$0")/lib.sh"`, then
//     `run 'COMMAND'` for each command to show. Commands that keep running
//     go through `start NAME 'COMMAND'` (output to NAME.log), and a script
//     that starts processes works in a scratch_dir and stops them with a
//     command it shows (lib.sh fails it otherwise). If
//     the output varies between runs, add `# readme: live` and a
//     `# readme: mask REGEXP` line for each part that varies (timestamps,
//     member IDs, counts). An example needs nothing but bin/tenure: what
//     it talks to, it starts (and stops, with a command it shows, so that
//     the next example pasted finds the addresses free). Run it from the
//     repository root.
//
//  2. Put an empty block, <!-- example: NAME -->, a ```console fence and
//     <!-- /example -->, where the Markdown should show it.
//
//  3. Fill it from a real run with
//
//     go test ./internal/readme -run TestReadme -update
//
//     (-run 'TestReadme/examples/NAME' for that one alone), and read the
//     diff before committing: the text around the block must say what the
//     output shows.
//
// The test gives each script a free address as TENURE_LISTEN and
// TENURE_BROKERS (a coordinator it starts must listen there) and rewrites
// that address in the output to 127.0.0.1:9092, the default a reader's
// commands use; it does the same for --http (TENURE_HTTP, TENURE_ADMIN:
// 127.0.0.1:9644). Live examples are skipped with -short; `make test`
// runs them all.
package readme

import (
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/internal/proctest"
)

var update = flag.Bool("update", false, "rewrite the example blocks of the Markdown files with the output of real runs")

// root is the repository, from this package's directory.
const root = "../.."

// defaultAddr is where `tenure serve` listens, and the other commands
// dial, by default.
const (
	defaultAddr     = "127.0.0.1:9092"
	defaultHTTPAddr = "127.0.0.1:9644"
)

func TestReadme(t *testing.T) {
	blocks := findBlocks(t)
	scripts := findScripts(t)
	for _, b := range blocks {
		if !slices.Contains(scripts, b.name) {
			t.Errorf("%s:%d: example %s has no script docs/examples/%s.sh", b.file, b.line, b.name, b.name)
		}
	}
	for _, name := range scripts {
		if !slices.ContainsFunc(blocks, func(b block) bool { return b.name == name }) {
			t.Errorf("docs/examples/%s.sh is shown nowhere: add <!-- example: %s --> to a Markdown file, or remove it", name, name)
		}
	}
	if t.Failed() {
		return
	}

	tenure := proctest.Build(t, "github.com/tenure-dev/tenure/cmd/tenure")[0]
	work := t.TempDir()
	if err := os.Mkdir(filepath.Join(work, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(tenure, filepath.Join(work, "bin", "tenure")); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	outputs := map[string]string{} // by example, for -update
	t.Run("examples", func(t *testing.T) {
		for _, b := range blocks {
			t.Run(b.name, func(t *testing.T) {
				t.Parallel()
				out := runExample(t, work, b)
				if *update {
					mu.Lock()
					outputs[b.name] = out
					mu.Unlock()
					return
				}
				s := readScript(t, b.name)
				if d := compare(s, b.body, out); d != "" {
					t.Errorf("%s:%d: example %s differs from a run of docs/examples/%s.sh (- %s, + run):\n%s\n"+
						"If the change is meant, regenerate the block with\n\tgo test ./internal/readme -run 'TestReadme/examples/%s' -update\n"+
						"and make the text around it agree.",
						b.file, b.line, b.name, b.name, b.file, d, b.name)
				}
			})
		}
	})
	if *update {
		writeUpdates(t, blocks, outputs)
	}
}

// findBlocks returns the example blocks of README.md and docs/*.md; names
// are unique.
func findBlocks(t *testing.T) []block {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []block
	seen := map[string]block{}
	for _, path := range append([]string{filepath.Join(root, "README.md")}, docs...) {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, path)
		bs, err := parseBlocks(rel, string(text))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			if prev, ok := seen[b.name]; ok {
				t.Fatalf("%s:%d: example %s is shown twice (also %s:%d)", b.file, b.line, b.name, prev.file, prev.line)
			}
			seen[b.name] = b
		}
		blocks = append(blocks, bs...)
	}
	if len(blocks) == 0 {
		t.Fatal("no example blocks in README.md or docs/*.md")
	}
	return blocks
}

// findScripts returns the names of the example scripts.
func findScripts(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(root, "docs", "examples", "*.sh"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range paths {
		if name := strings.TrimSuffix(filepath.Base(p), ".sh"); name != "lib" {
			names = append(names, name)
		}
	}
	return names
}

func scriptPath(name string) string {
	return filepath.Join(root, "docs", "examples", name+".sh")
}

func readScript(t *testing.T, name string) script {
	t.Helper()
	text, err := os.ReadFile(scriptPath(name))
	if err != nil {
		t.Fatal(err)
	}
	s, err := parseScript("docs/examples/"+name+".sh", string(text))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// runExample runs b's script from work, where bin/tenure is, and returns
// its output with the test's addresses rewritten to the defaults. It
// skips the example where its script's needs are not met.
func runExample(t *testing.T, work string, b block) string {
	s := readScript(t, b.name)
	if s.live && testing.Short() {
		t.Skip("a live example runs real processes for seconds")
	}
	addr, err := proctest.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	httpAddr, err := proctest.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"TMPDIR=" + t.TempDir(), "TENURE_LISTEN=" + addr, "TENURE_BROKERS=" + addr,
		"TENURE_HTTP=" + httpAddr, "TENURE_ADMIN=http://" + httpAddr}
	rewrite := []string{addr, defaultAddr, httpAddr, defaultHTTPAddr}
	abs, err := filepath.Abs(scriptPath(b.name))
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", abs)
	cmd.Dir = work
	cmd.Env = append(inherited(), env...)
	// The script's background processes share its process group: a
	// script that hangs is killed with all of them.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err = cmd.Run()
	if cmd.Process != nil && syscall.Kill(-cmd.Process.Pid, 0) == nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t.Errorf("docs/examples/%s.sh left processes running: the processes it starts must go through start", b.name)
	}
	if err != nil {
		t.Fatalf("docs/examples/%s.sh: %v (after %v)\nstdout:\n%s\nstderr:\n%s", b.name, err, time.Since(start).Round(time.Millisecond), &stdout, &stderr)
	}
	t.Logf("docs/examples/%s.sh ran in %v", b.name, time.Since(start).Round(time.Millisecond))
	return strings.NewReplacer(rewrite...).Replace(stdout.String())
}

// inherited is the test's environment without what would change what the
// scripts do: tenure's flag variables, the scripts' DSN, TMPDIR.
func inherited() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "TENURE_") || name == "DSN" || name == "TMPDIR" {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// writeUpdates rewrites the blocks of the examples that ran.
func writeUpdates(t *testing.T, blocks []block, outputs map[string]string) {
	t.Helper()
	byFile := map[string]map[string]string{}
	for _, b := range blocks {
		out, ok := outputs[b.name]
		if !ok {
			t.Logf("%s:%d: example %s did not run: its block is unchanged", b.file, b.line, b.name)
			continue
		}
		if byFile[b.file] == nil {
			byFile[b.file] = map[string]string{}
		}
		byFile[b.file][b.name] = out
	}
	for file, bodies := range byFile {
		path := filepath.Join(root, file)
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		updated, err := replaceBodies(file, string(text), bodies)
		if err != nil {
			t.Fatal(err)
		}
		if updated == string(text) {
			continue
		}
		if err := os.WriteFile(path, []byte(updated), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("updated %s", file)
	}
}
