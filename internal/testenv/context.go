package testenv

import (
	"context"
	"testing"
	"time"
)

// Context returns a context that ends with t, or after 20 s, so that a
// wedged server fails the test instead of hanging it.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}
