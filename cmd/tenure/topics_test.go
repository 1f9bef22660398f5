package main

import (
	"bytes"
	"context"
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
