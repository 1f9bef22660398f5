package workload_test

import (
	"reflect"
	"testing"

	"github.com/tenure-dev/tenure/epoch"
	"github.com/tenure-dev/tenure/internal/workload"
)

func TestSummarize(t *testing.T) {
	// rec is the record of partition p, sequence number seq and token tok,
	// accepted at order.
	rec := func(p epoch.Partition, seq int64, tok epoch.Token, order int64) workload.Stored {
		return workload.Stored{Record: workload.Record{Partition: p, Seq: seq, Token: tok}, Order: order}
	}
	for _, tc := range []struct {
		name   string
		stored []workload.Stored
		want   []workload.TokenSummary
	}{
		{"nothing", nil, []workload.TokenSummary{}},
		{"one owner", []workload.Stored{rec(0, 0, 1, 1), rec(0, 1, 1, 2), rec(1, 0, 1, 3)},
			[]workload.TokenSummary{{Token: 1, Records: 3}}},
		{"a new owner redoes work from the committed offset",
			[]workload.Stored{rec(0, 0, 1, 1), rec(0, 1, 1, 2), rec(0, 2, 1, 3), rec(0, 1, 2, 4), rec(0, 2, 2, 5), rec(0, 3, 2, 6)},
			[]workload.TokenSummary{{Token: 1, Records: 3}, {Token: 2, Records: 3, Again: 2}}},
		{"a stale write accepted after a newer token",
			[]workload.Stored{rec(3, 0, 2, 1), rec(3, 1, 3, 2), rec(3, 2, 2, 3), rec(3, 3, 3, 4)},
			[]workload.TokenSummary{{Token: 2, Records: 2, AfterNewer: 1}, {Token: 3, Records: 2}}},
		{"partitions are apart: an older token in another partition is no stale write",
			[]workload.Stored{rec(0, 0, 5, 1), rec(1, 0, 4, 2), rec(1, 0, 6, 3)},
			[]workload.TokenSummary{{Token: 4, Records: 1}, {Token: 5, Records: 1}, {Token: 6, Records: 1, Again: 1}}},
		{"a stale copy of a sequence number counts both ways",
			[]workload.Stored{rec(2, 7, 1, 1), rec(2, 7, 2, 2), rec(2, 7, 1, 3)},
			[]workload.TokenSummary{{Token: 1, Records: 2, Again: 1, AfterNewer: 1}, {Token: 2, Records: 1, Again: 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := workload.Summarize(tc.stored); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Summarize = %+v, want %+v", got, tc.want)
			}
		})
	}
}
