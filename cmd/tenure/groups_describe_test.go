package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestDescribeExplainsStaticLeave: a member of epoch -2 in the table comes
// with a line that says what it is; a group without one has no such line.
func TestDescribeExplainsStaticLeave(t *testing.T) {
	epoch := func(e int32) *int32 { return &e }
	inst := "worker-1"
	for _, tc := range []struct {
		epochs []int32
		note   bool
	}{
		{[]int32{5, 5}, false},
		{[]int32{5, staticLeftEpoch}, true},
	} {
		d := &groupDescription{Group: "g", Type: "consumer", State: "Stable", Epoch: epoch(5), AssignmentEpoch: epoch(5)}
		for i, e := range tc.epochs {
			d.Members = append(d.Members, describedMember{MemberID: string(rune('a' + i)), InstanceID: &inst, MemberEpoch: epoch(e)})
		}
		var out bytes.Buffer
		d.writeTable(&out)
		if got := strings.Contains(out.String(), "EPOCH -2: a static member that left"); got != tc.note {
			t.Errorf("epochs %v: note shown %v, want %v:\n%s", tc.epochs, got, tc.note, out.String())
		}
		if rows := tableRows(out.String(), "MEMBER"); len(rows) != len(tc.epochs) {
			t.Errorf("epochs %v: %d member rows, want %d", tc.epochs, len(rows), len(tc.epochs))
		}
	}
}
