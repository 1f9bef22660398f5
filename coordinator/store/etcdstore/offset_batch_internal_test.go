package etcdstore

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/tenure-dev/tenure/coordinator"
)

// FuzzDecodeBatch: a batch value comes from etcd, so any bytes: the
// decoder never panics, and what it accepts has entries whose values
// decode, names no partition twice, and encodes to a value that decodes
// to the same entries.
func FuzzDecodeBatch(f *testing.F) {
	md := "checkpoint"
	var seed []byte
	for i, r := range []*coordinator.OffsetRecord{
		{Topic: "orders", Partition: 0, Offset: 1234567, LeaderEpoch: -1, Metadata: &md, Token: 16, MemberID: "hq0F3Jh_gGIwoTygd5badg"},
		{Topic: "a/b", Partition: -1, Offset: math.MaxInt64},
		{Topic: "\xff", Partition: math.MaxInt32, MemberID: "\xfe"},
		{Topic: "orders", Partition: 1, Deleted: true},
	} {
		val := ""
		if !r.Deleted {
			val = offsetValueString(r)
		}
		seed = appendBatchLine(seed, r.Topic, r.Partition, val)
		f.Add(seed)
		if i == 0 {
			f.Add(appendBatchLine(nil, "", 0, "{}"))
		}
	}
	for _, s := range []string{
		"", "\n", "t/0 -", "t/0 -\nt/0 -\n", "t/00 -\n", "t/+1 -\n", "t -\n", "t/0\n", "t/0 {}\n", "t/0 {} \n",
		"t/0 {\"fr\":5}\n", "t/0 {\"o\":1}\r\n", "%2f/0 -\n", "%2F/0 -\n", "a%/0 -\n", "t/2147483648 -\n",
		"t/0 {\"v\":9}\n", "t/0 {\"x\":true,\"m\":\"YQ==\"}\n", "t/1/2 -\n", " /0 -\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := decodeBatch(data)
		if err != nil {
			return
		}
		if len(entries) == 0 {
			t.Fatalf("%q: accepted with no entries", data)
		}
		seen := map[tp]bool{}
		for _, e := range entries {
			if seen[e.tp] {
				t.Fatalf("%q: %v twice", data, e.tp)
			}
			seen[e.tp] = true
			if e.val == nil {
				continue
			}
			if _, fr, err := decodeOffset("g", e.topic, e.partition, e.val); err != nil || fr != 0 {
				t.Fatalf("%q: entry %v accepted with a value that does not decode (%v) or a fold order %d", data, e.tp, err, fr)
			}
		}
		again, err := decodeBatch(encodeBatch(entries))
		if err != nil {
			t.Fatalf("%q: re-encoded, it fails: %v", data, err)
		}
		if !reflect.DeepEqual(again, entries) {
			t.Fatalf("%q: re-encoded, it reads %v, not %v", data, again, entries)
		}
	})
}

// TestBatchPlan: a transaction's offset records of a group become one
// batch key, the last write of a partition replacing the first; a
// group's deletion drops the batch before it (the deletion covers it)
// and starts a new transaction for one after it; a batch holds at most
// MaxTxnOps-1 entries.
func TestBatchPlan(t *testing.T) {
	k := newKeys("/p/", 0, 1)
	o := func(g string, p int32, off int64) coordinator.Record {
		return &coordinator.OffsetRecord{Group: g, Topic: "t", Partition: p, Offset: off}
	}
	del := func(g string, p int32) coordinator.Record {
		return &coordinator.OffsetRecord{Group: g, Topic: "t", Partition: p, Deleted: true}
	}
	gone := func(g string) coordinator.Record { return &coordinator.GroupRecord{Group: g, Deleted: true} }
	for _, tc := range []struct {
		name   string
		recs   []coordinator.Record
		maxOps int
		want   [][]string
	}{{
		name:   "groups, a deletion between",
		recs:   []coordinator.Record{o("g", 0, 1), o("h", 0, 1), o("g", 1, 1), o("g", 0, 2), gone("h"), o("h", 1, 3), o("g", 2, 1), del("g", 3)},
		maxOps: 4,
		want: [][]string{
			{"put /p/groups/g/obatch/s-1 = t/0 {\"o\":2}\nt/1 {\"o\":1}\n", "put /p/groups/h/obatch/s-2 = t/0 {\"o\":1}\n"},
			{"delete /p/groups/h/../p/groups/h/group", "delete /p/groups/h/group\x00../p/groups/h0", "put /p/groups/h/group = {\"d\":true}"},
			{"put /p/groups/h/obatch/s-3 = t/1 {\"o\":3}\n", "put /p/groups/g/obatch/s-4 = t/2 {\"o\":1}\nt/3 -\n"},
		},
	}, {
		name:   "the deletion covers the batch before it",
		recs:   []coordinator.Record{o("g", 0, 1), gone("g")},
		maxOps: 10,
		want: [][]string{
			{"delete /p/groups/g/../p/groups/g/group", "delete /p/groups/g/group\x00../p/groups/g0", "put /p/groups/g/group = {\"d\":true}"},
		},
	}, {
		name:   "a full batch",
		recs:   []coordinator.Record{o("g", 0, 1), o("g", 1, 1), o("g", 2, 1), o("g", 0, 5)},
		maxOps: 3,
		want: [][]string{
			{"put /p/groups/g/obatch/s-1 = t/0 {\"o\":1}\nt/1 {\"o\":1}\n"},
			{"put /p/groups/g/obatch/s-2 = t/2 {\"o\":1}\nt/0 {\"o\":5}\n"},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			batchKey := func(g string) string {
				n++
				return k.offsetBatch(g, "s-"+strconv.Itoa(n))
			}
			var got [][]string
			for _, txn := range k.plan(tc.recs, tc.maxOps, 1<<20, batchKey) {
				var ops []string
				for _, op := range txn.clientOps() {
					switch {
					case op.IsPut():
						ops = append(ops, "put "+string(op.KeyBytes())+" = "+string(op.ValueBytes()))
					case len(op.RangeBytes()) > 0:
						ops = append(ops, fmt.Sprintf("delete %s..%s", op.KeyBytes(), op.RangeBytes()))
					default:
						ops = append(ops, "delete "+string(op.KeyBytes()))
					}
				}
				got = append(got, ops)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("transactions:\n%q\nwant:\n%q", got, tc.want)
			}
		})
	}
}

// FuzzScanBatch: the scanner a fold reads batches with accepts the lines
// that a plain reading of the format (a reference, below) accepts, and
// reads the same partitions and values, whatever the values hold.
func FuzzScanBatch(f *testing.F) {
	for _, s := range []string{
		"", "\n", "t/0 -\n", "t/0 -\nt/0 -\n", "t/00 -\n", "t/-0 -\n", "t/+1 -\n", "t/-1 x\n", "t -\n", "t/0\n",
		"t/0 {}\n", "t/0 {} \n", "t/0  \n", "t/0 \n", "%2f/0 -\n", "%2F/0 -\n", "a%/0 -\n", "%41/0 -\n",
		"t/2147483647 -\n", "t/2147483648 -\n", "t/-2147483648 -\n", "t/-2147483649 -\n", "t/99999999999 -\n",
		"t/1/2 -\n", " /0 -\n", "/0 -\n", "t/0 -\nu/1 {\"o\":1}\n", "t/0 -",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		want, wantErr := referenceBatchLines(data)
		var got []batchEntry
		var sc batchScanner
		err := sc.scan(data, func(p tp, val []byte) error {
			got = append(got, batchEntry{p, val})
			return nil
		})
		switch {
		case (err != nil) != (wantErr != nil):
			t.Fatalf("%q: scan says %v, the reference %v", data, err, wantErr)
		case err != nil:
			if !errors.Is(err, errBadBatch) {
				t.Fatalf("%q: %v is not errBadBatch", data, err)
			}
		case !reflect.DeepEqual(got, want):
			t.Fatalf("%q: scan reads %v, the reference %v", data, got, want)
		}
	})
}

// referenceBatchLines reads a batch value's lines as the format says,
// with the standard library, checking no value.
func referenceBatchLines(data []byte) ([]batchEntry, error) {
	if len(data) == 0 || data[len(data)-1] != '\n' {
		return nil, errors.New("empty, or the last line has no end")
	}
	var out []batchEntry
	for _, line := range strings.SplitAfter(string(data[:len(data)-1]), "\n") {
		line = strings.TrimSuffix(line, "\n")
		name, val, ok := strings.Cut(line, " ")
		if !ok {
			return nil, errors.New("no value")
		}
		et, part, ok := strings.Cut(name, "/")
		if !ok {
			return nil, errors.New("no partition")
		}
		topic, err := unescape(et)
		if err != nil {
			return nil, err
		}
		n, err := strconv.ParseInt(part, 10, 32)
		if err != nil || strconv.FormatInt(n, 10) != part {
			return nil, errors.New("partition")
		}
		e := batchEntry{tp: tp{topic, int32(n)}}
		if val != "-" {
			e.val = []byte(val)
		}
		out = append(out, e)
	}
	return out, nil
}

func TestFoldInterval(t *testing.T) {
	for _, tc := range []struct{ every, writes, want int }{
		{64, 0, 64},
		{64, 1, 64},
		{64, 256, 64},
		{64, 1000, 250},
		{64, 1024, 256},
		{64, 100000, 256},
		{2, 40, 8},
		{1, 3, 1},
	} {
		if got := foldInterval(tc.every, tc.writes); got != tc.want {
			t.Errorf("foldInterval(%d, %d) = %d, want %d", tc.every, tc.writes, got, tc.want)
		}
	}
}
