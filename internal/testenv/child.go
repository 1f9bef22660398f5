package testenv

import (
	"bufio"
	"os"
	"os/exec"
	"testing"
)

// StartChild runs this test binary again as a child process that runs no
// test, with env=value added to its environment (its TestMain or init reads
// it and plays the child's part), and returns it with a scanner of its
// standard output. Its standard error is the test's.
func StartChild(t testing.TB, env, value string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env+"="+value)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, bufio.NewScanner(out)
}
