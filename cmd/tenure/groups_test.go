package main

import (
	"bytes"
	"context"
	"flag"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/tenure-dev/tenure/internal/testenv"
	"github.com/tenure-dev/tenure/member"
)

// groupsOut runs `tenure groups ARGS... --brokers broker` as the command
// line would, flags and all, and returns what it printed, or its error.
// A subcommand that does not read --brokers (explain) is not given it.
func groupsOut(t *testing.T, broker string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	fs := flag.NewFlagSet("tenure groups", flag.ContinueOnError)
	cli := newGroupsCLI(fs, groupsSubcommands(), &out)
	subs := groupsCommand().subs
	if i := slices.IndexFunc(subs, func(s subcommand) bool { return s.name == args[0] }); i < 0 || subs[i].reads("brokers") {
		// Before a "--" that ends the flags, if any.
		at := len(args)
		if i := slices.Index(args, "--"); i >= 0 {
			at = i
		}
		args = slices.Insert(slices.Clone(args), at, "--brokers", broker)
	}
	pos, err := parseCommandLine(fs, subs, args, noEnv)
	if err != nil {
		return "", err
	}
	err = cli.run(context.Background(), pos)
	return out.String(), err
}

// tableRows returns the rows of the table that starts at the line whose
// first word is header, as fields.
func tableRows(out, header string) [][]string {
	var rows [][]string
	in := false
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
			in = false
		case f[0] == header:
			in = true
		case in:
			rows = append(rows, f)
		}
	}
	return rows
}

// TestGroups administers a KIP-848 group of two members and a classic
// group of one stock kgo consumer on an in-process coordinator: list,
// describe, offsets, delete.
func TestGroups(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, leaks) }) // after the server's cleanup
	broker := testenv.StartTenure(t, testenv.TenureConfig(t, 3*time.Second, 300*time.Millisecond, 8))

	// Two KIP-848 members; each claim commits 100+partition once.
	var sessions []*member.Session
	for range 2 {
		s, err := member.Join(context.Background(), member.Config{
			Brokers:        []string{broker},
			Group:          "jobs-848",
			Topics:         []string{"jobs"},
			SessionTimeout: 3 * time.Second,
			Logger:         zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
		}, func(c *member.Claim) {
			ctx := c.Context()
			for ctx.Err() == nil && c.Commit(ctx, 100+int64(c.Partition()), "m") != nil {
				time.Sleep(50 * time.Millisecond)
			}
			<-ctx.Done()
		})
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, s)
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s.Close(ctx)
		}()
	}
	// A classic group: a stock kgo consumer (cooperative-sticky).
	classic, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ConsumerGroup("jobs-classic"), kgo.ConsumeTopics("jobs"),
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

	ids := []string{sessions[0].MemberID(), sessions[1].MemberID()}
	slices.Sort(ids)
	pollUntil(t, 20*time.Second, "both groups stable, offsets committed", func() string {
		out, err := groupsOut(t, broker, "describe", "jobs-848")
		if err != nil {
			return err.Error()
		}
		rows := tableRows(out, "MEMBER")
		if !strings.Contains(out, "STATE        Stable") || len(rows) != 2 || len(rows[0]) != 7 || rows[0][5] != "4" || rows[1][5] != "4" {
			return "KIP-848 group:\n" + out
		}
		if out, err := groupsOut(t, broker, "describe", "jobs-classic"); err != nil || !strings.Contains(out, "Stable") || !strings.Contains(out, "jobs:0-7") {
			return "classic group: " + out
		}
		if out, _ := groupsOut(t, broker, "offsets", "jobs-848"); len(tableRows(out, "TOPIC")) != 8 {
			return "offsets:\n" + out
		}
		return ""
	})

	out, err := groupsOut(t, broker, "list")
	if err != nil {
		t.Fatal(err)
	}
	if want := "" +
		"GROUP         TYPE      STATE   PROTOCOL TYPE\n" +
		"jobs-848      consumer  Stable  consumer\n" +
		"jobs-classic  classic   Stable  consumer\n"; out != want {
		t.Errorf("list:\n%s\nwant:\n%s", out, want)
	}

	out, err = groupsOut(t, broker, "describe", "jobs-848")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"GROUP        jobs-848\n", "TYPE         consumer (KIP-848)\n", "ASSIGNOR     uniform\n", "MEMBERS      2\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("describe lacks %q:\n%s", want, out)
		}
	}
	// Members sorted by ID, each with its epoch and 4 partitions; together
	// they own all 8, once.
	rows := tableRows(out, "MEMBER")
	var owned []string
	for i, r := range rows {
		if r[0] != ids[i] || r[1] != "-" || r[2] == "0" || r[3] != "kgo" {
			t.Errorf("member row %q, want member %s, no instance, an epoch, client kgo", r, ids[i])
		}
		owned = append(owned, r[6])
	}
	var all []int
	for _, cell := range owned {
		ps := parsePartitions(t, cell)
		if len(ps) != 4 {
			t.Errorf("a member owns %q, want 4 partitions", cell)
		}
		all = append(all, ps...)
	}
	slices.Sort(all)
	if !slices.Equal(all, []int{0, 1, 2, 3, 4, 5, 6, 7}) {
		t.Errorf("members own %q, want each of the 8 partitions once", owned)
	}
	t.Logf("describe:\n%s", out)

	out, err = groupsOut(t, broker, "describe", "jobs-classic")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"TYPE         classic\n", "PROTOCOL     consumer/cooperative-sticky\n", "MEMBERS      1\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("describe of the classic group lacks %q:\n%s", want, out)
		}
	}
	if rows := tableRows(out, "MEMBER"); len(rows) != 1 || rows[0][4] != "8" || rows[0][5] != "jobs:0-7" {
		t.Errorf("classic member rows %q, want one owning jobs:0-7", rows)
	}
	t.Logf("describe:\n%s", out)

	out, err = groupsOut(t, broker, "offsets", "jobs-848")
	if err != nil {
		t.Fatal(err)
	}
	want := "TOPIC  PARTITION  OFFSET  METADATA  ERROR\n"
	for p := range 8 {
		want += "jobs   " + string(rune('0'+p)) + "          10" + string(rune('0'+p)) + "     m         -\n"
	}
	if out != want {
		t.Errorf("offsets:\n%s\nwant:\n%s", out, want)
	}

	checkGroupsJSON(t, broker, ids)

	// A group with members is not deleted; once they left, it is.
	if _, err := groupsOut(t, broker, "delete", "jobs-848"); err == nil || !strings.Contains(err.Error(), "still has members") {
		t.Errorf("delete of a group with members: %v", err)
	}
	for _, s := range sessions {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := s.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
		cancel()
	}
	pollUntil(t, 10*time.Second, "the KIP-848 group empty", func() string {
		out, _ := groupsOut(t, broker, "describe", "jobs-848")
		if !strings.Contains(out, "MEMBERS      0") {
			return out
		}
		return ""
	})
	if out, err := groupsOut(t, broker, "delete", "jobs-848"); err != nil || out != "deleted group jobs-848\n" {
		t.Errorf("delete of an empty group: %q, %v", out, err)
	}
	// A group that only has offsets, committed by an admin, is deleted
	// too; here with -o json.
	adm := kadm.NewClient(classic)
	commitCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: "jobs", Partition: 0, At: 7, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(commitCtx, "jobs-admin", offs); err != nil {
		t.Fatalf("admin commit: %v", err)
	}
	out, err = groupsOut(t, broker, "delete", "jobs-admin", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var deleted groupDeleted
	checkShape(t, "delete", out, deleteShape, &deleted)
	if deleted != (groupDeleted{Group: "jobs-admin", Deleted: true}) {
		t.Errorf("delete -o json: %+v", deleted)
	}
	for _, sub := range []string{"describe", "offsets", "delete"} {
		if _, err := groupsOut(t, broker, sub, "jobs-848"); err == nil || err.Error() != `group "jobs-848" not found` {
			t.Errorf("%s of a deleted group: %v, want not found", sub, err)
		}
	}
}

// The JSON shapes of docs/OPERATIONS.md.
var (
	topicPartitionsShape = obj{"topic": str, "partitions": arrayOf{num}}
	listShape            = obj{"groups": arrayOf{obj{"group": str, "type": str, "state": str, "protocol_type": str, "coordinator_id": num}}}
	describeShape        = obj{
		"group": str, "type": str, "state": str,
		"epoch": orNull{num}, "assignment_epoch": orNull{num}, "assignor": orNull{str},
		"protocol_type": orNull{str}, "protocol": orNull{str},
		"coordinator": obj{"node_id": num, "host": str, "port": num},
		"store":       orNull{str},
		"members": arrayOf{obj{
			"member_id": str, "instance_id": orNull{str}, "member_epoch": orNull{num},
			"client_id": str, "client_host": str,
			"subscribed_topics": arrayOf{str}, "subscribed_topic_regex": orNull{str},
			"assignment": arrayOf{topicPartitionsShape}, "target_assignment": orNull{arrayOf{topicPartitionsShape}},
		}},
	}
	offsetsShape = obj{"group": str, "offsets": arrayOf{obj{
		"topic": str, "partition": num, "offset": num, "leader_epoch": num, "metadata": str, "error": orNull{str},
	}}}
	deleteShape = obj{"group": str, "deleted": boolean}
)

// checkGroupsJSON checks list, describe and offsets with -o json against
// the stable groups of TestGroups: the documented shapes, and the same
// facts as the tables.
func checkGroupsJSON(t *testing.T, broker string, ids []string) {
	t.Helper()
	out, err := groupsOut(t, broker, "list", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var list groupList
	checkShape(t, "list", out, listShape, &list)
	if want := []listedGroup{{"jobs-848", "consumer", "Stable", "consumer", 0}, {"jobs-classic", "classic", "Stable", "consumer", 0}}; !slices.Equal(list.Groups, want) {
		t.Errorf("list -o json: %+v, want %+v", list.Groups, want)
	}

	out, err = groupsOut(t, broker, "--output", "json", "describe", "jobs-848")
	if err != nil {
		t.Fatal(err)
	}
	var d groupDescription
	checkShape(t, "describe", out, describeShape, &d)
	if d.Type != "consumer" || d.State != "Stable" || d.Epoch == nil || *d.Epoch <= 0 || d.AssignmentEpoch == nil || *d.AssignmentEpoch != *d.Epoch ||
		deref(d.Assignor) != "uniform" || d.Protocol != nil || d.ProtocolType != nil || len(d.Members) != 2 {
		t.Errorf("describe -o json of the KIP-848 group:\n%s", out)
	}
	var all []int
	for i, m := range d.Members {
		if m.MemberID != ids[i] || m.MemberEpoch == nil || *m.MemberEpoch <= 0 || m.ClientID != "kgo" || !slices.Equal(m.SubscribedTopics, []string{"jobs"}) ||
			formatPartitions(m.TargetAssignment) != formatPartitions(m.Assignment) {
			t.Errorf("member %d: %+v", i, m)
		}
		all = append(all, parsePartitions(t, formatPartitions(m.Assignment))...)
	}
	slices.Sort(all)
	if !slices.Equal(all, []int{0, 1, 2, 3, 4, 5, 6, 7}) {
		t.Errorf("describe -o json: members own %v, want each of the 8 partitions once", all)
	}

	out, err = groupsOut(t, broker, "describe", "jobs-classic", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	d = groupDescription{}
	checkShape(t, "describe", out, describeShape, &d)
	if d.Type != "classic" || d.Epoch != nil || d.Assignor != nil || deref(d.Protocol) != "cooperative-sticky" || deref(d.ProtocolType) != "consumer" ||
		len(d.Members) != 1 || d.Members[0].MemberEpoch != nil || d.Members[0].TargetAssignment != nil ||
		formatPartitions(d.Members[0].Assignment) != "jobs:0-7" || !slices.Equal(d.Members[0].SubscribedTopics, []string{"jobs"}) {
		t.Errorf("describe -o json of the classic group:\n%s", out)
	}

	out, err = groupsOut(t, broker, "offsets", "jobs-848", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var offs offsetList
	checkShape(t, "offsets", out, offsetsShape, &offs)
	if offs.Group != "jobs-848" || len(offs.Offsets) != 8 {
		t.Fatalf("offsets -o json:\n%s", out)
	}
	for p, o := range offs.Offsets {
		if o.Topic != "jobs" || o.Partition != int32(p) || o.Offset != 100+int64(p) || o.Metadata != "m" || o.Error != nil {
			t.Errorf("offset %d: %+v", p, o)
		}
	}
}

// parsePartitions reads a cell such as "jobs:0-2,5" back into partition
// numbers.
func parsePartitions(t *testing.T, cell string) []int {
	t.Helper()
	_, ranges, ok := strings.Cut(cell, "jobs:")
	if !ok {
		t.Fatalf("cell %q names no jobs partitions", cell)
	}
	var out []int
	for _, r := range strings.Split(ranges, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		if !isRange {
			hi = lo
		}
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || a > b {
			t.Fatalf("cell %q: bad range %q", cell, r)
		}
		for p := a; p <= b; p++ {
			out = append(out, p)
		}
	}
	return out
}

func TestGroupsUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no subcommand", nil, "missing subcommand"},
		{"unknown subcommand", []string{"rebalance"}, "unknown subcommand"},
		{"describe without a group", []string{"describe"}, "describe takes one GROUP"},
		{"offsets with two groups", []string{"offsets", "a", "b"}, "offsets takes one GROUP"},
		{"list with a group", []string{"list", "a"}, "list takes no argument"},
		{"bad flag after the subcommand", []string{"describe", "g", "--nope"}, "unknown flag --nope"},
		{"empty brokers", []string{"list", "--brokers", ""}, "--brokers is empty"},
		{"unknown output", []string{"list", "-o", "yaml"}, `invalid value "yaml" for --o: want table or json`},
		{"what-if without a group", []string{"what-if", "--add", "1"}, "what-if takes one GROUP"},
		{"a what-if flag elsewhere", []string{"describe", "g", "--seeds", "2"}, "unknown flag --seeds for groups describe (it is a flag of groups what-if)"},
		{"what-if without a change", []string{"what-if", "g"}, "what-if needs a change"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), append([]string{"groups"}, tc.args...), &stdout, &stderr); code != 2 {
				t.Errorf("exit %d, want 2; stderr:\n%s", code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, stderr.String())
			}
		})
	}

	// Flags after the subcommand and its argument count: --brokers
	// reaches the in-process coordinator, which knows no such group.
	broker := testenv.StartTenure(t, testenv.TenureConfig(t, 3*time.Second, 300*time.Millisecond, 8))
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"groups", "--timeout", "5s", "describe", "nosuch", "--brokers", broker}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), `group "nosuch" not found`) {
		t.Errorf("exit %d, stderr %q; want 1 and not found", code, stderr.String())
	}

	var help bytes.Buffer
	if code := run(context.Background(), []string{"groups", "--help"}, &help, &stderr); code != 0 {
		t.Fatalf("help: exit %d", code)
	}
	for _, want := range []string{"list", "describe GROUP", "offsets GROUP", "delete GROUP", "what-if GROUP", "--remove MEMBER", "--add N",
		"--brokers", "TENURE_BROKERS", "--timeout", "--output format  [TENURE_OUTPUT]", "-o\n    \tshort for --output", "docs/OPERATIONS.md"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("help lacks %q", want)
		}
	}
}
