package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"runtime/pprof"
)

// startCPUProfile writes a CPU profile to path until the returned function
// is called; an empty path profiles nothing.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// simulatorGC makes the collector run less often for a command that runs
// the simulator, unless GOGC says otherwise. A run's live heap is a few
// megabytes while it allocates hundreds (a heartbeat's request and
// response, made by the cores), so at the default GOGC of 100 the
// collector runs every couple of megabytes and takes about a tenth of the
// run; at 400 the process stays under a hundred megabytes.
func simulatorGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
}
