package coordinator_test

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/internal/testgroups"
)

// TestRebuildResume checks that a group rebuilt ahead of time and resumed
// later is the group Restore makes at the later time, and that Resume
// runs once.
func TestRebuildResume(t *testing.T) {
	recs, _ := testgroups.Stable(t, "g")
	cfg := stableConfig()
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	want, err := coordinator.Restore("g", &cfg, rand.New(rand.NewPCG(1, 2)), at, recs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := coordinator.Rebuild("g", &cfg, rand.New(rand.NewPCG(1, 2)), recs)
	if err != nil {
		t.Fatal(err)
	}
	got.Step(at, coordinator.Resume{})
	if got.String() != want.String() || nextTick(got) != nextTick(want) {
		t.Fatalf("rebuilt and resumed:\n%s\nnext tick %v\nrestored:\n%s\nnext tick %v", got, nextTick(got), want, nextTick(want))
	}
	got.Step(at.Add(time.Hour), coordinator.Resume{})
	if got.String() != want.String() {
		t.Fatalf("a second Resume changed the group:\n%s", got)
	}
}

// TestRestoredSessionsSpread checks that, with a takeover grace (tenure
// serve's default), the sessions of groups restored in one instant end
// over an eighth of the grace after it, not in one tick, and none
// before: the 16,000 members of 1,000 groups, none of whom comes back,
// are expelled spread out, even though the groups' member IDs are the
// same.
func TestRestoredSessionsSpread(t *testing.T) {
	recs, _ := testgroups.Stable(t, "template")
	cfg := stableConfig()
	cfg.TakeoverGrace = 30 * time.Second
	session := max(cfg.ConsumerSessionTimeout, cfg.TakeoverGrace)
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	const groups, members = 1000, 16
	tick := 50 * time.Millisecond
	expired := map[time.Duration]int{} // by tick after the timeout
	for i := range groups {
		name := fmt.Sprintf("g-%04d", i)
		g, err := coordinator.Restore(name, &cfg, rand.New(rand.NewPCG(1, 2)), at, testgroups.Renamed(recs, name))
		if err != nil {
			t.Fatal(err)
		}
		if next := nextTick(g).Sub(at); next < session {
			t.Fatalf("group %s: a session ends %v after the restore, before the grace %v", name, next, session)
		}
		g.Step(at.Add(session-time.Nanosecond), coordinator.Tick{})
		if n := g.MemberCount(); n != members {
			t.Fatalf("group %s: %d members left before the grace ended", name, n)
		}
		for now := nextTick(g); g.MemberCount() > 0; now = nextTick(g) {
			if now.IsZero() || now.Sub(at) >= session+session/8 {
				t.Fatalf("group %s: %d members outlive the spread (next tick %v)", name, g.MemberCount(), now)
			}
			n := g.MemberCount()
			g.Step(now, coordinator.Tick{})
			expired[(now.Sub(at)-session)/tick] += n - g.MemberCount()
		}
	}
	// Evenly spread over an eighth of the grace in ticks of 50 ms (75
	// ticks for 30 s, under 2% of the members in each): none holds more
	// than 5%.
	ticks := slices.Sorted(maps.Keys(expired))
	for _, k := range ticks {
		if n := expired[k]; n > groups*members/20 {
			t.Fatalf("%d of %d sessions end in one %v tick, %v after the timeout; over %d ticks", n, groups*members, tick, k*tick, len(ticks))
		}
	}
}

func stableConfig() coordinator.Config {
	cfg := coordinator.DefaultConfig()
	topics := coordinator.NewStaticTopics()
	topics.Add(testgroups.Topic.Name, testgroups.Topic.ID, testgroups.Topic.Partitions)
	cfg.Topics = topics
	return cfg
}

// nextTick drains g's Ready and returns when g must be ticked next.
func nextTick(g *coordinator.Group) time.Time {
	for g.HasReady() {
		g.Advance(g.Ready())
	}
	return g.Ready().NextTick
}

// TestRebuildSharesTopicNames: a group rebuilt from records that each hold
// their own copy of the topic's name (as the store decodes them) keeps one
// copy, its resolved topic's, in every member's subscription, assignment
// and target.
func TestRebuildSharesTopicNames(t *testing.T) {
	recs, _ := testgroups.Stable(t, "template")
	cfg := stableConfig()
	g, err := coordinator.Rebuild("g", &cfg, rand.New(rand.NewPCG(1, 2)), testgroups.Decoded(recs, "g"))
	if err != nil {
		t.Fatal(err)
	}
	if shared, total := coordinator.TopicStrings(g); total == 0 || shared != total {
		t.Fatalf("%d of the group's %d topic names share its resolved topic's", shared, total)
	}
}

// TestRestoreOffsets checks that a group rebuilt ahead of time whose
// offsets alone changed since, given the offsets of now with
// RestoreOffsets and then resumed, is the group Restore makes of the
// records of now; and that RestoreOffsets refuses a resumed group and
// another group's offsets.
func TestRestoreOffsets(t *testing.T) {
	recs, _ := testgroups.Stable(t, "g")
	offset := func(p int32, off int64, deleted bool) *coordinator.OffsetRecord {
		return &coordinator.OffsetRecord{Group: "g", Topic: testgroups.Topic.Name, Partition: p, Offset: off, Token: 3,
			MemberID: "m", Deleted: deleted}
	}
	then := append(slices.Clip(recs), offset(0, 10, false), offset(1, 11, false), offset(2, 12, false))
	// Since the rebuild: 0 committed again, 1 deleted, 3 committed.
	later := []coordinator.Record{offset(0, 20, false), offset(1, 0, true), offset(3, 23, false)}
	now := append(slices.Clip(then), later...)
	cfg := stableConfig()
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	want, err := coordinator.Restore("g", &cfg, rand.New(rand.NewPCG(1, 2)), at, now)
	if err != nil {
		t.Fatal(err)
	}
	got, err := coordinator.Rebuild("g", &cfg, rand.New(rand.NewPCG(1, 2)), then)
	if err != nil {
		t.Fatal(err)
	}
	if err := got.RestoreOffsets(now); err != nil {
		t.Fatal(err)
	}
	got.Step(at, coordinator.Resume{})
	if got.String() != want.String() || nextTick(got) != nextTick(want) {
		t.Fatalf("rebuilt, given the offsets of now and resumed:\n%s\nrestored from the records of now:\n%s", got, want)
	}
	if err := got.RestoreOffsets(now); !errors.Is(err, coordinator.ErrNotRebuilt) {
		t.Errorf("RestoreOffsets after Resume: %v, want ErrNotRebuilt", err)
	}
	other, err := coordinator.Rebuild("g", &cfg, rand.New(rand.NewPCG(1, 2)), then)
	if err != nil {
		t.Fatal(err)
	}
	foreign := &coordinator.OffsetRecord{Group: "h", Topic: testgroups.Topic.Name, Partition: 0, Offset: 1}
	if err := other.RestoreOffsets([]coordinator.Record{foreign}); !errors.Is(err, coordinator.ErrCorruptRecords) {
		t.Errorf("RestoreOffsets of another group's offset: %v, want ErrCorruptRecords", err)
	}
}
