// Package benchcpu measures the CPU a benchmark's process spends: on a
// shared machine other processes stretch wall time but not this figure,
// so benchmarks report it beside their rates. Only tests import it.
package benchcpu

import (
	"syscall"
	"time"
)

// Process is the user and system CPU time this process has used so far,
// or 0 if the kernel does not say.
func Process() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
