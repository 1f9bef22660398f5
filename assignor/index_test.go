package assignor

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

var all = []Assignor{Uniform(), Range(), Rendezvous(DefaultEpsilon)}

func TestInvalidInput(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      Input
		culprit string
	}{
		{
			name:    "duplicate member",
			in:      Input{Members: []Member{{ID: "x"}, {ID: "y"}, {ID: "x"}}, Topics: []Topic{{Name: "t", Partitions: 1}}},
			culprit: `"x"`,
		},
		{
			name:    "duplicate topic",
			in:      Input{Members: []Member{{ID: "x"}}, Topics: []Topic{{Name: "t", Partitions: 1}, {Name: "u"}, {Name: "t", Partitions: 2}}},
			culprit: `"t"`,
		},
		{
			name:    "negative partitions",
			in:      Input{Members: []Member{{ID: "x"}}, Topics: []Topic{{Name: "t", Partitions: -1}}},
			culprit: `"t"`,
		},
		{
			name:    "too many partitions",
			in:      Input{Members: []Member{{ID: "x"}}, Topics: []Topic{{Name: "t", Partitions: MaxPartitions}, {Name: "u", Partitions: 1}}},
			culprit: "limit",
		},
	} {
		for _, a := range all {
			t.Run(tc.name+"/"+a.Name(), func(t *testing.T) {
				out, err := a.Assign(tc.in)
				if !errors.Is(err, ErrInvalidInput) {
					t.Fatalf("err = %v, want ErrInvalidInput", err)
				}
				if !strings.Contains(err.Error(), tc.culprit) {
					t.Errorf("error %q does not name %s", err, tc.culprit)
				}
				if out != nil {
					t.Errorf("got an assignment with the error: %v", out)
				}
			})
		}
	}
}

func TestEdgeInputs(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Input
		want Assignment
	}{
		{"empty", Input{}, Assignment{}},
		{
			"no topics",
			Input{Members: []Member{{ID: "a"}, {ID: "b"}}},
			Assignment{"a": {}, "b": {}},
		},
		{
			"no members",
			Input{Topics: []Topic{{Name: "t", Partitions: 3}}},
			Assignment{},
		},
		{
			"empty topic",
			Input{Topics: []Topic{{Name: "t"}}, Members: []Member{{ID: "a"}}},
			Assignment{"a": {}},
		},
		{
			// u has no subscriber: its partitions stay unassigned.
			"unsubscribed topic",
			Input{
				Topics:  []Topic{{Name: "t", Partitions: 1}, {Name: "u", Partitions: 2}},
				Members: []Member{{ID: "a", Topics: []string{"t", "nope"}, Owned: []TopicPartition{{"u", 0}}}, {ID: "b", Topics: []string{}}},
			},
			Assignment{"a": {{"t", 0}}, "b": {}},
		},
	} {
		for _, a := range all {
			t.Run(tc.name+"/"+a.Name(), func(t *testing.T) {
				out := mustAssign(t, a, tc.in)
				if !reflect.DeepEqual(out, tc.want) {
					t.Fatalf("got %v, want %v", out, tc.want)
				}
				for id, tps := range out {
					if tps == nil {
						t.Errorf("member %s: nil slice, want empty", id)
					}
				}
			})
		}
	}
}

// TestAssignmentSlicesCapped checks that appending to one member's slice
// cannot overwrite another's, although they share a backing array.
func TestAssignmentSlicesCapped(t *testing.T) {
	in := Input{Topics: []Topic{{Name: "t", Partitions: 4}}, Members: []Member{{ID: "a"}, {ID: "b"}}}
	for _, a := range all {
		out := mustAssign(t, a, in)
		b0 := out["b"][0]
		_ = append(out["a"], TopicPartition{"x", 9})
		_ = append(out["a"][:0], TopicPartition{"x", 9}, TopicPartition{"x", 9}, TopicPartition{"x", 9})
		if out["b"][0] != b0 {
			t.Errorf("%s: appending to a's slice changed b's", a.Name())
		}
	}
}
