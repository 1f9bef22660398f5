package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tenure-dev/tenure/internal/testenv"
)

func TestTopicsCreateAndList(t *testing.T) {
	broker := testenv.StartTenure(t, testenv.TenureConfig(t, 3*time.Second, 300*time.Millisecond, 8))
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	var out bytes.Buffer
	if err := createTopics(ctx, adm, &out, []topicArg{{"work", 16}, {"jobs", -1}}); err != nil {
		t.Fatal(err)
	}
	if err := createTopics(ctx, adm, &out, []topicArg{{"work", 4}}); err != nil {
		t.Fatalf("an existing topic is not an error: %v", err)
	}
	var rows []string
	for _, l := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] != "TOPIC" {
			rows = append(rows, strings.Join(f, " "))
		}
	}
	if want := []string{"work 16 created", "jobs 8 created", "work 16 exists"}; strings.Join(rows, ",") != strings.Join(want, ",") {
		t.Errorf("create rows %q, want %q", rows, want)
	}
	out.Reset()
	if err := listTopics(ctx, adm, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "jobs 8 ") ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[2]), " "), "work 16 ") || len(strings.Fields(lines[2])[2]) != 22 {
		t.Fatalf("list:\n%s", out.String())
	}
}

// TestTopicsDelete: the deleted topic is gone, with the group's offsets
// of it; a topic that does not exist is reported and makes the command
// fail, the others of the command still deleted; a name given twice is
// deleted once.
func TestTopicsDelete(t *testing.T) {
	broker := testenv.StartTenure(t, testenv.TenureConfig(t, 3*time.Second, 300*time.Millisecond, 8))
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := createTopics(ctx, adm, io.Discard, []topicArg{{"work", 4}, {"jobs", 4}}); err != nil {
		t.Fatal(err)
	}
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: "work", Partition: 1, At: 10, LeaderEpoch: -1})
	offs.Add(kadm.Offset{Topic: "jobs", Partition: 2, At: 20, LeaderEpoch: -1})
	if r, err := adm.CommitOffsets(ctx, "g", offs); err != nil || r.Error() != nil {
		t.Fatalf("commit: %v %v", err, r.Error())
	}

	var out bytes.Buffer
	err = deleteTopics(ctx, adm, &out, []string{"work", "nosuch", "work"})
	if err == nil || !strings.Contains(err.Error(), `"nosuch"`) || strings.Contains(err.Error(), `"work"`) {
		t.Fatalf("error %v: want one naming nosuch only", err)
	}
	var rows []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n")[1:] {
		rows = append(rows, strings.Join(strings.Fields(l), " "))
	}
	if len(rows) != 2 || rows[0] != "work deleted" || !strings.HasPrefix(rows[1], "nosuch UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("rows %q", rows)
	}

	out.Reset()
	if err := listTopics(ctx, adm, &out); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 2 || strings.Fields(lines[1])[0] != "jobs" {
		t.Fatalf("list after the deletion:\n%s", out.String())
	}
	fetched, err := adm.FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fetched.Lookup("work", 1); ok {
		t.Errorf("the group still has an offset of the deleted topic")
	}
	if o, ok := fetched.Lookup("jobs", 2); !ok || o.At != 20 {
		t.Errorf("the other topic's offset: %+v %v", o, ok)
	}

	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"topics", "delete", "work", "--brokers", broker}, &stdout, &stderr); code != 1 {
		t.Fatalf("deleting a deleted topic: exit %d, want 1; stderr:\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("stderr lacks the reason:\n%s", stderr.String())
	}
}

func TestTopicsUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "missing subcommand"},
		{[]string{"drop"}, "unknown subcommand"},
		{[]string{"list", "x"}, "list takes no argument"},
		{[]string{"create"}, "create takes one or more"},
		{[]string{"create", "work:0"}, "positive integer"},
		{[]string{"create", ":3"}, "empty topic name"},
		{[]string{"delete"}, "delete takes one or more"},
		{[]string{"delete", "work", ""}, "empty topic name"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), append([]string{"topics"}, tc.args...), &stdout, &stderr); code != 2 {
			t.Errorf("%q: exit %d, want 2", tc.args, code)
		}
		if !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%q: stderr lacks %q:\n%s", tc.args, tc.want, stderr.String())
		}
	}
}
