package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store"
	"github.com/tenure-dev/tenure/coordinator/store/storetest"
)

// describe renders records one per line, for comparison.
func describe(recs []coordinator.Record) string {
	var b strings.Builder
	for _, r := range recs {
		switch r := r.(type) {
		case *coordinator.GroupRecord:
			fmt.Fprintf(&b, "group %s epoch=%d deleted=%v\n", r.Group, r.Epoch, r.Deleted)
		case *coordinator.MemberRecord:
			fmt.Fprintf(&b, "member %s/%s topics=%v\n", r.Group, r.MemberID, r.Topics)
		case *coordinator.AssignmentRecord:
			fmt.Fprintf(&b, "assignment %s/%s epoch=%d owned=%v\n", r.Group, r.MemberID, r.MemberEpoch, r.Owned)
		case *coordinator.OffsetRecord:
			fmt.Fprintf(&b, "offset %s/%s[%d]=%d token=%v\n", r.Group, r.Topic, r.Partition, r.Offset, r.Token)
		}
	}
	return b.String()
}

func TestMemoryCompactsAndOrders(t *testing.T) {
	ctx := context.Background()
	m := store.NewMemory()
	topics := []string{"jobs"}
	owned := []coordinator.OwnedPartition{{Topic: "jobs", Partition: 0, Token: 1}}
	steps := [][]coordinator.Record{
		{&coordinator.GroupRecord{Group: "b", Epoch: 1}},
		{
			&coordinator.GroupRecord{Group: "a", Epoch: 1},
			&coordinator.MemberRecord{Group: "a", MemberID: "m2", Topics: topics},
			&coordinator.MemberRecord{Group: "a", MemberID: "m1", Topics: topics},
			&coordinator.AssignmentRecord{Group: "a", MemberID: "m1", MemberEpoch: 1, Owned: owned},
		},
		{
			&coordinator.GroupRecord{Group: "a", Epoch: 2},
			&coordinator.OffsetRecord{Group: "a", Topic: "jobs", Partition: 1, Offset: 5, Token: 1},
			&coordinator.OffsetRecord{Group: "a", Topic: "jobs", Partition: 0, Offset: 3, Token: 1},
			&coordinator.OffsetRecord{Group: "a", Topic: "jobs", Partition: 0, Offset: 4, Token: 2},
			&coordinator.MemberRecord{Group: "a", MemberID: "m2", Deleted: true},
			&coordinator.OffsetRecord{Group: "b", Topic: "x", Partition: 0, Offset: 1},
			&coordinator.OffsetRecord{Group: "b", Topic: "x", Partition: 0, Deleted: true},
		},
	}
	for _, recs := range steps {
		if err := m.Persist(ctx, recs); err != nil {
			t.Fatal(err)
		}
	}
	got, err := m.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := `group a epoch=2 deleted=false
member a/m1 topics=[jobs]
assignment a/m1 epoch=1 owned=[{jobs 0 1}]
offset a/jobs[0]=4 token=2
offset a/jobs[1]=5 token=1
group b epoch=1 deleted=false
`
	if d := describe(got); d != want {
		t.Fatalf("got:\n%swant:\n%s", d, want)
	}

	if got, _ := m.LoadGroup(ctx, "b"); describe(got) != "group b epoch=1 deleted=false\n" {
		t.Fatalf("LoadGroup(b):\n%s", describe(got))
	}
	if got, _ := m.LoadGroup(ctx, "none"); got != nil {
		t.Fatalf("LoadGroup of an unknown group: %v", got)
	}

	// Deleting a group keeps only its tombstone, with its epoch.
	if err := m.Persist(ctx, []coordinator.Record{&coordinator.GroupRecord{Group: "a", Epoch: 2, Deleted: true}}); err != nil {
		t.Fatal(err)
	}
	got, _ = m.Load(ctx)
	if d, want := describe(got), "group a epoch=2 deleted=true\ngroup b epoch=1 deleted=false\n"; d != want {
		t.Fatalf("after delete:\n%swant:\n%s", d, want)
	}
}

type bogusRecord struct{ coordinator.Record }

func TestMemoryRejectsUnknownRecordsWhole(t *testing.T) {
	ctx := context.Background()
	m := store.NewMemory()
	err := m.Persist(ctx, []coordinator.Record{&coordinator.GroupRecord{Group: "a", Epoch: 1}, bogusRecord{}})
	if !errors.Is(err, store.ErrUnknownRecord) {
		t.Fatalf("error %v, want ErrUnknownRecord", err)
	}
	if got, _ := m.Load(ctx); len(got) != 0 {
		t.Fatalf("a rejected batch wrote %d records", len(got))
	}
}

func TestMemoryClosed(t *testing.T) {
	ctx := context.Background()
	m := store.NewMemory()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Persist(ctx, nil); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Persist after Close: %v", err)
	}
	if _, err := m.Load(ctx); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Load after Close: %v", err)
	}
}

// TestMemoryDeleteTopic: a deletion names the topic by name and ID, and
// deletes nothing of a topic created again under the name.
func TestMemoryDeleteTopic(t *testing.T) {
	ctx := context.Background()
	m := store.NewMemory()
	old := &coordinator.TopicRecord{Name: "jobs", ID: coordinator.TopicID{1}, Partitions: 8}
	again := &coordinator.TopicRecord{Name: "jobs", ID: coordinator.TopicID{2}, Partitions: 4}
	for _, step := range []struct {
		what    string
		create  *coordinator.TopicRecord
		delete  *coordinator.TopicRecord
		deleted bool
		want    []*coordinator.TopicRecord
	}{
		{what: "create", create: old, want: []*coordinator.TopicRecord{old}},
		{what: "another ID deletes nothing", delete: again, want: []*coordinator.TopicRecord{old}},
		{what: "its own ID deletes it", delete: old, deleted: true},
		{what: "a second deletion finds nothing", delete: old},
		{what: "create again", create: again, want: []*coordinator.TopicRecord{again}},
		{what: "the old topic's deletion deletes nothing", delete: old, want: []*coordinator.TopicRecord{again}},
	} {
		if step.create != nil {
			if got, err := m.CreateTopic(ctx, step.create); err != nil || got != step.create {
				t.Fatalf("%s: CreateTopic %v, %v", step.what, got, err)
			}
		}
		if step.delete != nil {
			if deleted, err := m.DeleteTopic(ctx, step.delete); err != nil || deleted != step.deleted {
				t.Fatalf("%s: DeleteTopic %v, %v; want %v", step.what, deleted, err, step.deleted)
			}
		}
		got, err := m.LoadTopics(ctx)
		if err != nil || len(got) != len(step.want) || len(got) == 1 && got[0] != step.want[0] {
			t.Fatalf("%s: LoadTopics %v, %v; want %v", step.what, got, err, step.want)
		}
	}
	m.Close()
	if _, err := m.DeleteTopic(ctx, again); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("DeleteTopic after Close: %v", err)
	}
}

// A server persists each Ready's records before sending its replies; at
// start-up it loads them back.
func ExampleMemory() {
	ctx := context.Background()
	s := store.NewMemory()
	defer s.Close()
	s.Persist(ctx, []coordinator.Record{
		&coordinator.GroupRecord{Group: "workers", Type: coordinator.Consumer, Epoch: 3},
		&coordinator.OffsetRecord{Group: "workers", Topic: "jobs", Partition: 7, Offset: 42, Token: 3},
	})
	recs, _ := s.Load(ctx)
	for _, r := range recs {
		switch r := r.(type) {
		case *coordinator.GroupRecord:
			fmt.Println("group", r.Group, "epoch", r.Epoch)
		case *coordinator.OffsetRecord:
			fmt.Printf("offset %s[%d] = %d under token %v\n", r.Topic, r.Partition, r.Offset, r.Token)
		}
	}
	// Output:
	// group workers epoch 3
	// offset jobs[7] = 42 under token 3
}

func TestMemoryTopicsCreateIfAbsent(t *testing.T) {
	ctx := context.Background()
	m := store.NewMemory()
	first := &coordinator.TopicRecord{Name: "jobs", ID: coordinator.TopicID{1}, Partitions: 64}
	if got, err := m.CreateTopic(ctx, first); err != nil || got != first {
		t.Fatalf("first creation: %+v, %v", got, err)
	}
	if got, err := m.CreateTopic(ctx, &coordinator.TopicRecord{Name: "jobs", ID: coordinator.TopicID{2}, Partitions: 8}); err != nil || got != first {
		t.Fatalf("second creation: %+v, %v; want the first's topic", got, err)
	}
	if all, err := m.LoadTopics(ctx); err != nil || len(all) != 1 || all[0] != first {
		t.Fatalf("LoadTopics: %v %v", all, err)
	}
}

func TestMemoryCredentials(t *testing.T) { storetest.Credentials(t, store.NewMemory()) }

func TestMemoryKeys(t *testing.T) { storetest.Keys(t, store.NewMemory()) }
