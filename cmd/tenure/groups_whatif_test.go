package main

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"pgregory.net/rapid"

	"github.com/tenure-dev/tenure/assignor"
	"github.com/tenure-dev/tenure/internal/testenv"
	"github.com/tenure-dev/tenure/member"
)

var (
	spreadShape   = obj{"mean": num, "min": num, "max": num}
	estimateShape = obj{"mean": num, "ci_low": num, "ci_high": num, "n": num}
	timingShape   = obj{"heartbeat_s": num, "session_s": num, "rebalance_s": num, "margin_s": num, "max_drift": num}
	riskShape     = obj{
		"unowned_partition_s_per_hour": estimateShape, "unavailable_partition_s_per_hour": estimateShape,
		"false_expulsions_per_member_day": estimateShape, "heartbeats_per_s": estimateShape,
		"reassign_s": orNull{estimateShape}, "double_owned_partition_s_per_hour": estimateShape,
		"unfenced_stale_writes_per_hour": estimateShape, "meets_tune_objective": boolean, "errors": arrayOf{str},
	}
	whatIfShape = obj{
		"group": str, "type": str, "state": str, "epoch": orNull{num},
		"change":         obj{"kind": str, "remove": arrayOf{str}, "add": num},
		"assignor":       obj{"name": str, "group_assignor": str, "same": boolean, "note": orNull{str}},
		"members_before": num, "members_after": num, "partitions": num,
		"moves":      arrayOf{obj{"topic": str, "partition": num, "from": str, "to": str}},
		"move_count": num, "fewest_moves": orNull{num}, "moves_without_change": num,
		"balance_before": obj{"members": num, "min": num, "max": num, "imbalance": num},
		"balance_after":  obj{"members": num, "min": num, "max": num, "imbalance": num},
		"members": arrayOf{obj{
			"member_id": str, "instance_id": orNull{str}, "status": str, "before": num, "after": num,
			"partitions": arrayOf{topicPartitionsShape},
		}},
		"timing": obj{"current": timingShape, "current_from": str, "proposed": orNull{timingShape}},
		"simulation": obj{"seeds": arrayOf{num}, "change_at_s": num, "scenario": str, "outcomes": arrayOf{obj{
			"event": str, "timing": str, "actions": arrayOf{str},
			"unowned_partition_s": spreadShape, "affected_partitions": spreadShape, "moves": spreadShape,
			"reassign_s": orNull{spreadShape},
			"runs": arrayOf{obj{
				"seed": num, "unowned_partition_s": num, "affected_partitions": num, "moves": num, "reassign_s": orNull{num},
			}},
		}}},
		"risk":        orNull{obj{"scenarios": arrayOf{str}, "seeds": arrayOf{num}, "current": riskShape, "proposed": riskShape}},
		"assumptions": arrayOf{str},
	}
)

// TestGroupsWhatIf asks what-if questions of a KIP-848 group of three
// members on 8 partitions and of a classic group of one stock kgo consumer,
// on an in-process coordinator: the moves must be the assignor's own, the
// simulated figures reproducible, and the JSON of the documented shape.
func TestGroupsWhatIf(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, leaks) })
	// A session long enough that members under -race on a loaded machine
	// keep it: the test compares what-if with a describe read just before.
	const session, heartbeat = 10 * time.Second, 500 * time.Millisecond
	broker := testenv.StartTenure(t, testenv.TenureConfig(t, session, heartbeat, 8))
	timing := []string{"--current-session", session.String(), "--current-heartbeat", heartbeat.String(), "--seeds", "2"}

	for range 3 {
		s, err := member.Join(context.Background(), member.Config{
			Brokers:        []string{broker},
			Group:          "whatif",
			Topics:         []string{"jobs"},
			SessionTimeout: session,
			Logger:         zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
		}, func(c *member.Claim) { <-c.Context().Done() })
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s.Close(ctx)
		}()
	}
	classic, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ConsumerGroup("whatif-classic"), kgo.ConsumeTopics("jobs"),
		kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer classic.Close()
	pollCtx, stopPolling := context.WithCancel(context.Background())
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for pollCtx.Err() == nil {
			classic.PollFetches(pollCtx)
		}
	}()
	defer func() { stopPolling(); <-polled }()

	var d groupDescription
	pollUntil(t, 20*time.Second, "both groups stable", func() string {
		out, err := groupsOut(t, broker, "describe", "whatif", "-o", "json")
		if err != nil {
			return err.Error()
		}
		d = groupDescription{}
		checkShape(t, "describe", out, describeShape, &d)
		if d.State != "Stable" || len(d.Members) != 3 || d.reconciling {
			return out
		}
		n := 0
		for _, m := range d.Members {
			n += countPartitions(m.Assignment)
			if formatPartitions(m.Assignment) != formatPartitions(m.TargetAssignment) {
				return out
			}
		}
		if n != 8 {
			return out
		}
		if out, err := groupsOut(t, broker, "describe", "whatif-classic"); err != nil || !strings.Contains(out, "jobs:0-7") {
			return "classic: " + out
		}
		return ""
	})

	// What the uniform assignor makes of the group as described, computed
	// here from the describe output alone.
	input := assignor.Input{Topics: []assignor.Topic{{Name: "jobs", Partitions: 8}}}
	held := map[string]int{}
	for _, m := range d.Members {
		am := assignor.Member{ID: m.MemberID, Topics: []string{"jobs"}}
		for _, p := range parsePartitions(t, formatPartitions(m.TargetAssignment)) {
			am.Owned = append(am.Owned, assignor.TopicPartition{Topic: "jobs", Partition: int32(p)})
		}
		held[m.MemberID] = len(am.Owned)
		input.Members = append(input.Members, am)
	}
	expectMoves := func(in assignor.Input) []partitionMove {
		out, err := assignor.Uniform().Assign(in)
		if err != nil {
			t.Fatal(err)
		}
		owner := map[int32]string{}
		for _, m := range input.Members {
			for _, tp := range m.Owned {
				owner[tp.Partition] = m.ID
			}
		}
		moves := []partitionMove{}
		for p := range int32(8) {
			for id, tps := range out {
				if slices.Contains(tps, assignor.TopicPartition{Topic: "jobs", Partition: p}) && owner[p] != id {
					moves = append(moves, partitionMove{"jobs", p, owner[p], id})
				}
			}
		}
		return moves
	}
	// The member with the most partitions leaves: more must move than
	// it holds, as the others are below their new share too.
	gone := d.Members[0].MemberID
	for _, m := range d.Members {
		if held[m.MemberID] > held[gone] {
			gone = m.MemberID
		}
	}

	t.Run("remove", func(t *testing.T) {
		out, err := groupsOut(t, broker, append([]string{"what-if", "whatif", "--remove", gone, "-o", "json"}, timing...)...)
		if err != nil {
			t.Fatal(err)
		}
		var w whatIf
		checkShape(t, "what-if", out, whatIfShape, &w)
		rest := slices.DeleteFunc(slices.Clone(input.Members), func(m assignor.Member) bool { return m.ID == gone })
		want := expectMoves(assignor.Input{Members: rest, Topics: input.Topics})
		if !slices.Equal(w.Moves, want) {
			t.Errorf("moves %+v, want the assignor's %+v", w.Moves, want)
		}
		if w.MoveCount != len(want) || w.FewestMoves == nil || *w.FewestMoves != held[gone] || w.MoveCount != *w.FewestMoves || w.MovesWithoutChange != 0 {
			t.Errorf("move count %d, fewest %v, without change %d; want %d moves, the %d the leaver held, none without the change",
				w.MoveCount, w.FewestMoves, w.MovesWithoutChange, len(want), held[gone])
		}
		if w.Assignor.Name != "uniform" || !w.Assignor.Same || w.MembersBefore != 3 || w.MembersAfter != 2 || w.Partitions != 8 ||
			w.BalanceAfter != (balanceOf{Members: 2, Min: 4, Max: 4}) || w.Change.Kind != changeRemove || !slices.Equal(w.Change.Remove, []string{gone}) ||
			w.Risk != nil || w.Timing.CurrentFrom != "flags" || w.Timing.Current.SessionS != session.Seconds() {
			t.Errorf("what-if --remove:\n%s", out)
		}
		// A crash leaves its partitions unowned until the session
		// expires, a graceful leave only for a hand-off.
		o := w.Simulation.Outcomes
		if len(o) != 2 || o[0].Event != "leave" || o[1].Event != "crash" || o[1].ReassignSeconds == nil || o[0].ReassignSeconds != nil {
			t.Fatalf("outcomes: %+v", o)
		}
		leave, crash := o[0], o[1]
		// The seeds are those in which the simulated leaver holds what
		// the live one does.
		for _, oc := range o {
			if oc.AffectedPartitions != (spread{float64(held[gone]), float64(held[gone]), float64(held[gone])}) || len(oc.Runs) != 2 ||
				!slices.Equal(w.Simulation.Seeds, []uint64{oc.Runs[0].Seed, oc.Runs[1].Seed}) {
				t.Errorf("%s: %+v over seeds %v, want %d partitions affected in each of 2 runs", oc.Event, oc, w.Simulation.Seeds, held[gone])
			}
		}
		if crash.ReassignSeconds.Min < (session-heartbeat).Seconds() || crash.UnownedPartitionSeconds.Min <= leave.UnownedPartitionSeconds.Max ||
			leave.UnownedPartitionSeconds.Max > 2*heartbeat.Seconds()*crash.AffectedPartitions.Max {
			t.Errorf("leave %+v, crash %+v: a crash should cost a session timeout, a leave a heartbeat or so per partition", leave, crash)
		}
		// The same seeds give the same figures.
		again, err := groupsOut(t, broker, append([]string{"what-if", "whatif", "--remove", gone, "-o", "json"}, timing...)...)
		if err != nil {
			t.Fatal(err)
		}
		var w2 whatIf
		checkShape(t, "what-if", again, whatIfShape, &w2)
		if !slices.EqualFunc(w.Simulation.Outcomes, w2.Simulation.Outcomes, sameOutcome) {
			t.Errorf("a second run gave other figures:\n%+v\n%+v", w.Simulation.Outcomes, w2.Simulation.Outcomes)
		}
		table, err := groupsOut(t, broker, append([]string{"what-if", "whatif", "--remove", gone}, timing...)...)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"MOVES       " + strconv.Itoa(len(want)) + " (fewest possible " + strconv.Itoa(held[gone]) + ")", "graceful leave", "crash", "ASSUMED"} {
			if !strings.Contains(table, want) {
				t.Errorf("table lacks %q:\n%s", want, table)
			}
		}
		t.Logf("what-if --remove:\n%s", table)
	})

	t.Run("add", func(t *testing.T) {
		out, err := groupsOut(t, broker, append([]string{"what-if", "whatif", "--add", "1", "-o", "json"}, timing...)...)
		if err != nil {
			t.Fatal(err)
		}
		var w whatIf
		checkShape(t, "what-if", out, whatIfShape, &w)
		in := assignor.Input{Members: append(slices.Clone(input.Members), assignor.Member{ID: "new-1", Topics: []string{"jobs"}}), Topics: input.Topics}
		if want := expectMoves(in); !slices.Equal(w.Moves, want) || w.MoveCount != len(want) || w.FewestMoves == nil || *w.FewestMoves != 2 {
			t.Errorf("moves %+v (fewest %v), want the assignor's %+v and 2", w.Moves, w.FewestMoves, want)
		}
		if len(w.Simulation.Outcomes) != 1 || w.Simulation.Outcomes[0].Event != "join" || w.Simulation.Outcomes[0].Moves.Mean != 2 {
			t.Errorf("outcomes %+v, want a join that moves 2 partitions", w.Simulation.Outcomes)
		}
	})

	t.Run("timing", func(t *testing.T) {
		out, err := groupsOut(t, broker, "what-if", "whatif", "--session", "5s", "--seeds", "1", "--risk-duration", "3m",
			"--current-session", session.String(), "--current-heartbeat", heartbeat.String(), "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		var w whatIf
		checkShape(t, "what-if", out, whatIfShape, &w)
		o := w.Simulation.Outcomes
		if w.Risk == nil || w.Timing.Proposed == nil || w.Timing.Proposed.SessionS != 5 || w.MoveCount != 0 || len(o) != 2 ||
			o[0].Timing != "current" || o[1].Timing != "proposed" {
			t.Fatalf("what-if timing:\n%s", out)
		}
		// A shorter session is noticed sooner.
		if o[1].ReassignSeconds.Max >= o[0].ReassignSeconds.Min {
			t.Errorf("crash to reassignment: %+v with the proposed session, %+v with the current", o[1].ReassignSeconds, o[0].ReassignSeconds)
		}
		if r := w.Risk; len(r.Scenarios) == 0 || r.Current.ReassignSeconds == nil || r.Proposed.ReassignSeconds == nil ||
			r.Proposed.ReassignSeconds.Mean >= r.Current.ReassignSeconds.Mean || r.Current.HeartbeatsPerSec.N != 1 {
			t.Errorf("risk %+v: a shorter session should reassign a crashed member's partitions sooner", r)
		}
		if _, err := groupsOut(t, broker, "what-if", "whatif", "--session", "1s", "--heartbeat", "900ms"); err == nil || !strings.Contains(err.Error(), "unsafe") {
			t.Errorf("an unsafe timing: %v", err)
		}
	})

	t.Run("classic", func(t *testing.T) {
		out, err := groupsOut(t, broker, "what-if", "whatif-classic", "--add", "1", "--seeds", "1", "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		var w whatIf
		checkShape(t, "what-if", out, whatIfShape, &w)
		if w.Type != "classic" || w.Epoch != nil || w.Assignor.Name != "uniform" || w.Assignor.Same || w.Assignor.GroupAssignor != "cooperative-sticky" ||
			w.MoveCount != 4 || w.Timing.CurrentFrom != "defaults" || w.Timing.Current.SessionS != 45 {
			t.Errorf("what-if of the classic group:\n%s", out)
		}
	})

	t.Run("errors", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"what-if", "whatif", "--remove", "nobody"}, `--remove nobody: no member or instance of group "whatif" has that ID (members: ` + d.Members[0].MemberID},
			{[]string{"what-if", "whatif-classic", "--remove", "x"}, "no member or instance"},
			{[]string{"what-if", "nosuch", "--add", "1"}, `group "nosuch" not found`},
			{[]string{"what-if", "whatif"}, "what-if needs a change"},
			{[]string{"what-if", "whatif", "--add", "1", "--session", "5s"}, "one kind of change at a time"},
			{[]string{"what-if", "whatif", "--add", "-1"}, "want a positive number"},
			{[]string{"what-if", "whatif", "--session", "3s", "--current-session", "3s", "--current-heartbeat", "300ms"}, "is the current one"},
			{[]string{"what-if", "whatif", "--add", "1", "--assignor", "sticky"}, `--assignor "sticky": want one of uniform, range, rendezvous`},
			{[]string{"list", "--add", "1"}, "unknown flag --add for groups list (it is a flag of groups what-if)"},
			{[]string{"what-if", "whatif", "--remove", ""}, "empty list"},
		} {
			if _, err := groupsOut(t, broker, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%q: %v, want %q", tc.args, err, tc.want)
			}
		}
		all := []string{"what-if", "whatif"}
		for _, m := range d.Members {
			all = append(all, "--remove", m.MemberID)
		}
		if _, err := groupsOut(t, broker, all...); err == nil || !strings.Contains(err.Error(), "nobody would own its partitions") {
			t.Errorf("removing every member: %v", err)
		}
	})
}

func sameOutcome(a, b simOutcome) bool {
	same := func(x, y *spread) bool { return x == nil && y == nil || x != nil && y != nil && *x == *y }
	return a.Event == b.Event && a.Timing == b.Timing && slices.Equal(a.Actions, b.Actions) &&
		a.UnownedPartitionSeconds == b.UnownedPartitionSeconds && a.AffectedPartitions == b.AffectedPartitions &&
		a.Moves == b.Moves && same(a.ReassignSeconds, b.ReassignSeconds)
}

// TestFewestMoves holds fewestMoves to Uniform, which moves the fewest
// partitions balance allows when members subscribe alike, and movesBetween
// to assignor.Moves, on random holdings (some partitions held by nobody)
// and random removals and additions.
func TestFewestMoves(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		parts := rapid.Int32Range(1, 64).Draw(t, "partitions")
		n := rapid.IntRange(1, 8).Draw(t, "members")
		in := assignor.Input{Topics: []assignor.Topic{{Name: "jobs", Partitions: parts}}}
		prev := assignor.Assignment{}
		for i := range n {
			id := "m" + strconv.Itoa(i)
			in.Members = append(in.Members, assignor.Member{ID: id, Topics: []string{"jobs"}})
			prev[id] = []assignor.TopicPartition{}
		}
		for p := range parts {
			if o := rapid.IntRange(-1, n-1).Draw(t, "owner"); o >= 0 {
				tp := assignor.TopicPartition{Topic: "jobs", Partition: p}
				in.Members[o].Owned = append(in.Members[o].Owned, tp)
				prev[in.Members[o].ID] = append(prev[in.Members[o].ID], tp)
			}
		}
		after := slices.Clone(in.Members)
		if n > 1 && rapid.Bool().Draw(t, "remove") {
			gone := rapid.SliceOfNDistinct(rapid.IntRange(0, n-1), 1, n-1, rapid.ID).Draw(t, "gone")
			after = slices.DeleteFunc(after, func(m assignor.Member) bool {
				return slices.ContainsFunc(gone, func(i int) bool { return in.Members[i].ID == m.ID })
			})
		} else {
			for i := range rapid.IntRange(1, 3).Draw(t, "add") {
				after = append(after, assignor.Member{ID: "new-" + strconv.Itoa(i), Topics: []string{"jobs"}})
			}
		}
		next, err := assignor.Uniform().Assign(assignor.Input{Members: after, Topics: in.Topics})
		if err != nil {
			t.Fatal(err)
		}
		moves := assignor.Moves(prev, next)
		if got := fewestMoves(prev, next, int(parts)); got != moves {
			t.Fatalf("fewestMoves %d, Uniform moved %d: prev %v, next %v", got, moves, prev, next)
		}
		if got := movesBetween(prev, next); len(got) != moves {
			t.Fatalf("movesBetween lists %d moves, assignor.Moves counts %d: %v", len(got), moves, got)
		}
	})
}
