package assignor

import "testing"

func tps(spec ...any) []TopicPartition {
	var out []TopicPartition
	for i := 0; i < len(spec); i += 2 {
		out = append(out, TopicPartition{spec[i].(string), int32(spec[i+1].(int))})
	}
	if out == nil {
		out = []TopicPartition{}
	}
	return out
}

func TestImbalance(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    Assignment
		want int
	}{
		{"nil", nil, 0},
		{"one member", Assignment{"a": tps("t", 0, "t", 1)}, 0},
		{"even", Assignment{"a": tps("t", 0), "b": tps("t", 1)}, 0},
		{"idle member counts", Assignment{"a": tps(), "b": tps("t", 0, "t", 1)}, 2},
		{"spread", Assignment{"a": tps("t", 0), "b": tps("t", 1, "t", 2, "t", 3), "c": tps("t", 4, "t", 5)}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Imbalance(tc.a); got != tc.want {
				t.Fatalf("Imbalance = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestMoves(t *testing.T) {
	for _, tc := range []struct {
		name       string
		prev, next Assignment
		want       int
	}{
		{"nothing", nil, nil, 0},
		{"same", Assignment{"a": tps("t", 0), "b": tps("t", 1)}, Assignment{"a": tps("t", 0), "b": tps("t", 1)}, 0},
		{"swap", Assignment{"a": tps("t", 0), "b": tps("t", 1)}, Assignment{"a": tps("t", 1), "b": tps("t", 0)}, 2},
		{"newly assigned is not a move", Assignment{"a": tps("t", 0)}, Assignment{"a": tps("t", 0), "b": tps("t", 1)}, 0},
		{"unassigned is not a move", Assignment{"a": tps("t", 0, "t", 1)}, Assignment{"a": tps("t", 0)}, 0},
		{"leaver's partitions move", Assignment{"a": tps("t", 0), "gone": tps("t", 1, "t", 2)}, Assignment{"a": tps("t", 0, "t", 1, "t", 2)}, 2},
		{"topic matters", Assignment{"a": tps("t", 0), "b": tps("u", 0)}, Assignment{"a": tps("t", 0), "b": tps("u", 0)}, 0},
		// A partition listed twice belongs to the lowest member ID.
		{"duplicate kept by lowest ID", Assignment{"a": tps("t", 0), "b": tps("t", 0)}, Assignment{"a": tps("t", 0)}, 0},
		{"duplicate moved from lowest ID", Assignment{"a": tps("t", 0), "b": tps("t", 0)}, Assignment{"b": tps("t", 0)}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Moves(tc.prev, tc.next); got != tc.want {
				t.Fatalf("Moves = %d, want %d", got, tc.want)
			}
		})
	}
}
