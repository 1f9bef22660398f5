package coordinator

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/tenure-dev/tenure/internal/ddtest"
)

// TestDatadrivenGroupTargetsOff runs every script with the group's
// GroupRecords barred from carrying targets (SetGroupTargets(false)), as
// a node of an HA set that still has nodes of an older tenure runs its
// groups: no GroupRecord may have Targets (drain fails the test), the
// restore checker must find every target in the AssignmentRecords after
// every Ready, and everything but the persisted records (replies, grants,
// events, timers) must be what the script expects with targets on.
func TestDatadrivenGroupTargetsOff(t *testing.T) {
	ddtest.Walk(t, func(t *testing.T, path string) {
		e := newTestEnv(t)
		e.targetsOff = true
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			out := e.run(t, d)
			if got, want := withoutPersist(out), withoutPersist(d.Expected); got != want {
				t.Errorf("%s: %s: with targets off:\n%s\nexpected (records aside):\n%s", d.Pos, d.Cmd, got, want)
			}
			return d.Expected // the script's records are those of targets on
		})
	})
}

// withoutPersist drops a rendered Ready's "persist:" lines.
func withoutPersist(out string) string {
	var b strings.Builder
	for line := range strings.Lines(out) {
		if !strings.HasPrefix(line, "persist: ") {
			b.WriteString(line)
		}
	}
	return strings.TrimRight(b.String(), "\n") // datadriven ends Expected with one
}

// TestGroupTargetsOff checks what the gate changes in the records: a
// fleet's join with targets off writes no GroupRecord with Targets and
// every target change in an AssignmentRecord in the step that makes it,
// as tenures before GroupRecord.Targets did (so more AssignmentRecords
// than with targets on), and a fail-over after every step restores the
// same group either way. A group turned on midway starts to carry them.
func TestGroupTargetsOff(t *testing.T) {
	for _, c := range []struct {
		members  int
		coalesce time.Duration
	}{{16, 0}, {16, 20 * time.Millisecond}} {
		t.Run(fmt.Sprintf("members=%d/coalesce=%v", c.members, c.coalesce), func(t *testing.T) {
			s := fleetJoin16
			s.members, s.partitions = c.members, int32(4*c.members)
			s.coalesce, s.restart = c.coalesce, true
			on := s.run(t)
			s.targetsOff = true
			off := s.run(t)
			for _, r := range off {
				if gr, ok := r.(*GroupRecord); ok && gr.Targets != nil {
					t.Fatalf("targets off wrote %s", renderRecord(r))
				}
			}
			withTargets := 0
			for _, r := range on {
				if gr, ok := r.(*GroupRecord); ok && gr.Targets != nil {
					withTargets++
				}
			}
			if withTargets == 0 {
				t.Fatal("targets on wrote no GroupRecord with Targets")
			}
			an, af := countRecords(on)["AssignmentRecord"], countRecords(off)["AssignmentRecord"]
			if af <= an {
				t.Fatalf("AssignmentRecords: %d with targets off, %d on; off must write the moved targets in them", af, an)
			}
			t.Logf("AssignmentRecords: on %d, off %d", an, af)
		})
	}
}
