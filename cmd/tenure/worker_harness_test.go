package main

import (
	"testing"
	"time"
)

// pollUntil polls cond until it returns "" or the timeout passes, and then
// fails the test with cond's last answer.
func pollUntil(t *testing.T, timeout time.Duration, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		why := cond()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v: %s", what, timeout, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
