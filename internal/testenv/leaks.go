package testenv

import (
	"fmt"
	"os"

	"go.uber.org/goleak"
)

// CheckLeaks returns the exit code of a TestMain whose m.Run returned code,
// to be called once it has stopped what it started: code if the tests
// failed; else 1, naming on stderr the goroutines that the tests or the
// stopped services left running; else 0.
func CheckLeaks(code int) int {
	if code != 0 {
		return code
	}
	if err := goleak.Find(); err != nil {
		fmt.Fprintln(os.Stderr, "leaked goroutines:", err)
		return 1
	}
	return 0
}
