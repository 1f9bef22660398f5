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
	cases := []struct {
		name string
		run  string
		r    row
		ok   bool
	}{
		{"an unlisted run passes", "kgo-848/one-leader/kill9", pass, true},
		{"an unlisted run fails", "kgo-848/one-leader/kill9", lost, false},
		{"a listed run fails as listed", "librdkafka/sharded/sigstop", lost, true},
		{"a listed run passes", "librdkafka/sharded/sigstop", pass, false},
		{"a listed run fails another check", "librdkafka/sharded/sigstop", expelledToo, false},
		{"a listed run that may pass passes", "kgo-classic/one-leader/isolate", pass, true},
		{"a listed run that may pass fails as listed", "kgo-classic/one-leader/isolate", lost, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := judge(c.run, c.r); (err == nil) != c.ok {
				t.Fatalf("judge: %v, want ok=%v", err, c.ok)
			}
		})
	}
}
