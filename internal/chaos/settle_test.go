//go:build unix

package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/internal/chaos/check"
)

func TestSettled(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 15, 0, 0, 0, time.UTC)
	cb := func(client, group, kind string, p int32, at time.Duration) check.Callback {
		return check.Callback{Client: client, Group: group, Callback: kind, Partition: p, T: t0.Add(at)}
	}
	commits := []*proc{{name: "c0"}, {name: "c1"}}
	settledCBs := []check.Callback{
		cb("c0", "a", check.CallbackAssigned, 0, 0), cb("c0", "a", check.CallbackAssigned, 1, 0),
		cb("c0", "a", check.CallbackRevoked, 1, time.Second), cb("c1", "a", check.CallbackAssigned, 1, 2*time.Second),
		cb("c1", "a", check.CallbackAssigned, 2, 2*time.Second),
	}
	for _, tc := range []struct {
		name string
		cbs  []check.Callback
		want string // a part of the reason, "" if settled
	}{
		{"settled", settledCBs, ""},
		{"a callback within the last second", append(settledCBs, cb("c1", "a", check.CallbackAssigned, 1, 9500*time.Millisecond)), "within the last second"},
		{"a committer without partitions", settledCBs[:2], "c1 holds no partition"},
		{"a partition held twice", append(settledCBs[:2:2], cb("c1", "a", check.CallbackAssigned, 1, 2*time.Second)), "partition 1 of a has 2 holders"},
		{"a partition lost and held by nobody", append(settledCBs[:5:5], cb("c1", "a", check.CallbackLost, 1, 3*time.Second)), "partition 1 of a has 0 holders"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := settled(tc.cbs, commits, 3, t0.Add(9*time.Second))
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Fatalf("settled: %q, want %q", got, tc.want)
			}
		})
	}
}
