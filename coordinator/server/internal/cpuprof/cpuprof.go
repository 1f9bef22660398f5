// Package cpuprof starts a CPU profile for the benchmark servers.
package cpuprof

import (
	"os"
	"runtime/pprof"
)

// Start writes a CPU profile to path until the returned function is called;
// an empty path profiles nothing.
func Start(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
