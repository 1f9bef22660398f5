package workload

import (
	"cmp"
	"slices"

	"github.com/tenure-dev/tenure/epoch"
)

// TokenSummary is what a resource holds of the records written under one
// token: the read-back of the demos (tenure worker --records).
type TokenSummary struct {
	Token   epoch.Token
	Records int
	// Again counts the records of a partition and sequence number that
	// the resource already held under an earlier Order: work redone by a
	// new owner from the last committed offset (delivery at least once).
	Again int
	// AfterNewer counts the records accepted after a record with a newer
	// token in their partition: stale writes that got through. A fenced
	// resource keeps it 0.
	AfterNewer int
}

// Summarize counts stored records by token, in token order. It takes the
// records as Records returns them: by partition, then in the order the
// resource accepted them.
func Summarize(stored []Stored) []TokenSummary {
	by := map[epoch.Token]*TokenSummary{}
	type key struct {
		p   epoch.Partition
		seq int64
	}
	seen := map[key]bool{}
	newest := map[epoch.Partition]epoch.Token{}
	for _, s := range stored {
		sum := by[s.Token]
		if sum == nil {
			sum = &TokenSummary{Token: s.Token}
			by[s.Token] = sum
		}
		sum.Records++
		k := key{s.Partition, s.Seq}
		if seen[k] {
			sum.Again++
		}
		seen[k] = true
		if s.Token < newest[s.Partition] {
			sum.AfterNewer++
		} else {
			newest[s.Partition] = s.Token
		}
	}
	out := make([]TokenSummary, 0, len(by))
	for _, sum := range by {
		out = append(out, *sum)
	}
	slices.SortFunc(out, func(a, b TokenSummary) int { return cmp.Compare(a.Token, b.Token) })
	return out
}
