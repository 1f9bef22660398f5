package server

import (
	"context"
	"time"
)

// follow calls reload on every signal of changed (a store's watch; nil
// if it has none) and every every, until ctx ends; tick tells reload
// which woke it. The ACLs and the signing keys are followed so.
func follow(ctx context.Context, changed <-chan struct{}, every time.Duration, reload func(tick bool)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		tick := false
		select {
		case <-ctx.Done():
			if changed != nil {
				for range changed { // the watch's goroutine ends
				}
			}
			return
		case _, ok := <-changed:
			if !ok {
				changed = nil
				continue
			}
		case <-t.C:
			tick = true
		}
		reload(tick)
	}
}
