package benchcpu

import "testing"

// TestProcessGrows: spinning on the CPU shows in Process.
func TestProcessGrows(t *testing.T) {
	start := Process()
	if start <= 0 {
		t.Fatalf("Process() = %v at start, want > 0", start)
	}
	x := uint64(1)
	for Process()-start < 20e6 { // 20 ms of CPU
		for range 1000 {
			x = x*6364136223846793005 + 1
		}
	}
	_ = x
}
