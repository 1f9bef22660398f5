package etcdstore

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/tenure-dev/tenure/coordinator"
)

// TestOffsetMergeMatchesEager: offsetMerge decodes only the winners, yet
// reads what decoding every value as it comes reads (referenceMerge): the
// same records, and an error whenever any value, a loser's included, does
// not decode, a batch holds a fold order or names a partition twice.
// Values of the shape tenure writes, values only the general decoder
// reads, and values neither reads are mixed, in keys and batches added in
// any order.
func TestOffsetMergeMatchesEager(t *testing.T) {
	values := []string{
		`{"o":5,"m":"a"}`, `{"o":6,"le":2,"md":"x","k":9,"m":"b"}`, `{}`,
		`{"o": 7}`, `{"m":"\u0063"}`, // the general decoder's
		`{"o":"eight"}`, `{"o":1,"fr":-2}`, `not json`, // neither's
	}
	rapid.Check(t, func(t *rapid.T) {
		type write struct {
			batch bool
			rev   int64
			lines []string // a batch's "p value" lines (value "-": a deletion)
			p     int32    // a key's partition
			val   string   // a key's value
		}
		var writes []write
		for i := range rapid.IntRange(1, 8).Draw(t, "writes") {
			rev := int64(10 + i)
			if rapid.Bool().Draw(t, "batch") {
				w := write{batch: true, rev: rev}
				for range rapid.IntRange(1, 4).Draw(t, "lines") {
					p := rapid.Int32Range(0, 3).Draw(t, "p")
					v := "-"
					if rapid.IntRange(0, 4).Draw(t, "deleted") > 0 {
						v = rapid.SampledFrom(values).Draw(t, "value")
						if rapid.IntRange(0, 9).Draw(t, "fr") == 0 {
							v = `{"o":1,"fr":3}`
						}
					}
					w.lines = append(w.lines, fmt.Sprintf("t/%d %s\n", p, v))
				}
				writes = append(writes, w)
				continue
			}
			v := rapid.SampledFrom(values).Draw(t, "value")
			if rapid.Bool().Draw(t, "folded") {
				v = fmt.Sprintf(`{"o":%d,"fr":%d}`, rev, rapid.Int64Range(1, 20).Draw(t, "order"))
			}
			writes = append(writes, write{rev: rev, p: rapid.Int32Range(0, 3).Draw(t, "p"), val: v})
		}
		// A mirror adds a group's keys, then its batches, in map order.
		writes = rapid.Permutation(writes).Draw(t, "order")
		m := newOffsetMerge(0)
		ref := referenceMerge{}
		var err, refErr error
		for _, w := range writes {
			if w.batch {
				val := []byte(strings.Join(w.lines, ""))
				err = cmp.Or(err, m.addBatch("g", w.rev, val))
				refErr = cmp.Or(refErr, ref.addBatch("g", w.rev, val))
			} else {
				err = cmp.Or(err, m.addKey("g", tp{"t", w.p}, w.rev, []byte(w.val)))
				refErr = cmp.Or(refErr, ref.addKey("g", tp{"t", w.p}, w.rev, []byte(w.val)))
			}
		}
		if (err != nil) != (refErr != nil) {
			t.Fatalf("error %v, decoding every value: %v", err, refErr)
		}
		if err != nil {
			return
		}
		got, err := m.records("g", nil)
		if err != nil {
			t.Fatalf("records: %v", err)
		}
		want := ref.records()
		byTP := func(a, b *coordinator.OffsetRecord) int { return cmp.Compare(a.Partition, b.Partition) }
		slices.SortFunc(got, byTP)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("records %v, decoding every value: %v", show(got), show(want))
		}
	})
}

func show(recs []*coordinator.OffsetRecord) []string {
	var out []string
	for _, r := range recs {
		out = append(out, fmt.Sprintf("%+v", *r))
	}
	return out
}

// referenceMerge is the read rule as it was first written: every value
// decoded as it is read, each partition keeping the write of the highest
// order (the later of two of the same).
type referenceMerge map[tp]struct {
	order int64
	rec   *coordinator.OffsetRecord
}

func (m referenceMerge) put(p tp, order int64, r *coordinator.OffsetRecord) {
	if cur, ok := m[p]; ok && cur.order > order {
		return
	}
	m[p] = struct {
		order int64
		rec   *coordinator.OffsetRecord
	}{order, r}
}

func (m referenceMerge) addKey(group string, p tp, modRev int64, val []byte) error {
	r, fr, err := decodeOffset(group, p.topic, p.partition, val)
	if err != nil {
		return err
	}
	m.put(p, cmp.Or(fr, modRev), r)
	return nil
}

func (m referenceMerge) addBatch(group string, modRev int64, val []byte) error {
	return readBatch(group, val, func(p tp, _ []byte, r *coordinator.OffsetRecord) { m.put(p, modRev, r) })
}

func (m referenceMerge) records() []*coordinator.OffsetRecord {
	var out []*coordinator.OffsetRecord
	for _, o := range m {
		if o.rec != nil {
			out = append(out, o.rec)
		}
	}
	slices.SortFunc(out, func(a, b *coordinator.OffsetRecord) int { return cmp.Compare(a.Partition, b.Partition) })
	return out
}
