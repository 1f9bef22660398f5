//go:build unix

package interop

import (
	"testing"
	"time"
)

func TestJudge(t *testing.T) {
	pass := row{served: time.Second, offsetsKept: true}
	lost := pass
	lost.lost, lost.unowned = 1, time.Second
	expelledToo := lost
	expelledToo.expelled = 1
	// The test's own list, so that it does not change as clients come off
	// the real one (expectedFailures).
	list := map[string]expectation{
		"c/sharded/sigstop":    {checks: []string{"lost", "unowned"}},
		"c/one-leader/isolate": {checks: []string{"lost", "unowned"}, mayPass: true},
	}
	cases := []struct {
		name string
		run  string
		r    row
		ok   bool
	}{
		{"an unlisted run passes", "c/one-leader/kill9", pass, true},
		{"an unlisted run fails", "c/one-leader/kill9", lost, false},
		{"a listed run fails as listed", "c/sharded/sigstop", lost, true},
		{"a listed run passes", "c/sharded/sigstop", pass, false},
		{"a listed run fails another check", "c/sharded/sigstop", expelledToo, false},
		{"a listed run that may pass passes", "c/one-leader/isolate", pass, true},
		{"a listed run that may pass fails as listed", "c/one-leader/isolate", lost, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := judgeBy(list, c.run, c.r); (err == nil) != c.ok {
				t.Fatalf("judge: %v, want ok=%v", err, c.ok)
			}
		})
	}
}
