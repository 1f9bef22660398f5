package sim

import (
	"embed"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

//go:embed scenarios/*.txt
var builtinFS embed.FS

// Builtins returns the names of the built-in scenarios, sorted: steady,
// gc-pauses, crash, host-crash, rolling-restart, scale-out, flaky-network
// and failover (each file's first comment says what it shows).
func Builtins() []string {
	entries, err := builtinFS.ReadDir("scenarios")
	if err != nil {
		panic(err) // embedded at build time
	}
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".txt"))
	}
	slices.Sort(names)
	return names
}

// TuningMix returns the built-in scenarios `tenure tune` weighs by
// default: all of them, so that process crashes (which close their
// connections), host crashes and network cuts (which do not), GC pauses up
// to and past the session, rolling restarts, scale-out and coordinator
// fail-overs all count.
func TuningMix() []string {
	return Builtins()
}

// Builtin returns the built-in scenario with the given name.
func Builtin(name string) (*Scenario, error) {
	src, err := BuiltinSource(name)
	if err != nil {
		return nil, err
	}
	return ParseScenario(name, src)
}

// BuiltinSource returns the text of the built-in scenario with the given
// name, to print or to start a scenario of one's own from.
func BuiltinSource(name string) (string, error) {
	b, err := builtinFS.ReadFile("scenarios/" + name + ".txt")
	if err != nil {
		return "", fmt.Errorf("%w: no built-in scenario %q (built in: %s)", ErrScenario, name, strings.Join(Builtins(), ", "))
	}
	return string(b), nil
}

// LoadScenario returns the built-in scenario called nameOrPath, or else
// parses the file at that path (named after the file, without extension).
func LoadScenario(nameOrPath string) (*Scenario, error) {
	if slices.Contains(Builtins(), nameOrPath) {
		return Builtin(nameOrPath)
	}
	b, err := os.ReadFile(nameOrPath)
	if err != nil {
		if os.IsNotExist(err) && !strings.ContainsAny(nameOrPath, `/\.`) {
			return nil, fmt.Errorf("%w: %q is neither a built-in scenario (%s) nor a file", ErrScenario, nameOrPath, strings.Join(Builtins(), ", "))
		}
		return nil, fmt.Errorf("%w: %v", ErrScenario, err)
	}
	name := strings.TrimSuffix(filepath.Base(nameOrPath), filepath.Ext(nameOrPath))
	return ParseScenario(name, string(b))
}
