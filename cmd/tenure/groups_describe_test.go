package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/tenure-dev/tenure/internal/proctest"
	"github.com/tenure-dev/tenure/member"
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

// TestDescribeMemoryStore: a group of a --store memory coordinator is
// described with a line saying that its tokens start again from 1 after a
// restart (and "store": "memory" in JSON), as the coordinator's own log
// says at start; a group of an etcd-backed coordinator is not, nor is one
// whose --admin names another node than the group's coordinator. Before,
// describe showed a memory store's group as any other.
func TestDescribeMemoryStore(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	tenure := proctest.Build(t, "github.com/tenure-dev/tenure/cmd/tenure")[0]
	serve := func(name string, store ...string) (broker, admin string) {
		p := proctest.StartServe(t, name, tenure, append([]string{"serve", "--listen", "{addr}", "--http", "{http}", "--partitions", "2"}, store...)...)
		return p.Addr, "http://" + p.HTTP
	}
	memBroker, memAdmin := serve("memory", "--store", "memory")
	etcdBroker, etcdAdmin := serve("etcd", "--data-dir", filepath.Join(t.TempDir(), "data"))
	for _, broker := range []string{memBroker, etcdBroker} {
		s, err := member.Join(context.Background(), member.Config{
			Brokers: []string{broker}, Group: "g", Topics: []string{"work"},
			Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
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
	const note = "STORE memory (tenure serve --store memory): after the coordinator restarts, tokens start again from 1"
	for _, tc := range []struct {
		name, broker, admin string
		memory              bool
	}{
		{"memory store", memBroker, memAdmin, true},
		{"etcd store", etcdBroker, etcdAdmin, false},
		{"admin API of another node", etcdBroker, memAdmin, false},
		{"no admin API", memBroker, "http://" + deadAddr(t), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := groupsOut(t, tc.broker, "describe", "g", "--admin", tc.admin)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "MEMBERS      1") || strings.Contains(out, note) != tc.memory {
				t.Errorf("describe, memory store %v:\n%s", tc.memory, out)
			}
			js, err := groupsOut(t, tc.broker, "describe", "g", "--admin", tc.admin, "-o", "json")
			if err != nil {
				t.Fatal(err)
			}
			var d struct {
				Store *string `json:"store"`
			}
			if err := json.Unmarshal([]byte(js), &d); err != nil {
				t.Fatalf("%v: %s", err, js)
			}
			if (d.Store != nil && *d.Store == "memory") != tc.memory || !tc.memory && d.Store != nil {
				t.Errorf("describe -o json, memory store %v: %s", tc.memory, js)
			}
		})
	}
}

func deadAddr(t *testing.T) string {
	a, err := proctest.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}
