package coordinator

import (
	"slices"
	"strings"
)

// Partition sets are slices sorted by topic, then partition, without
// duplicates; these helpers keep them that way.

func compareOwned(a, b OwnedPartition) int {
	return compareTP(TopicPartition{a.Topic, a.Partition}, TopicPartition{b.Topic, b.Partition})
}

// indexOwned returns the index of tp in the sorted ps.
func indexOwned(ps []OwnedPartition, tp TopicPartition) (int, bool) {
	return slices.BinarySearchFunc(ps, tp, func(p OwnedPartition, tp TopicPartition) int {
		return compareTP(TopicPartition{p.Topic, p.Partition}, tp)
	})
}

func containsOwned(ps []OwnedPartition, tp TopicPartition) bool {
	_, ok := indexOwned(ps, tp)
	return ok
}

func containsTP(tps []TopicPartition, tp TopicPartition) bool {
	_, ok := slices.BinarySearchFunc(tps, tp, compareTP)
	return ok
}

// sortTPs sorts tps and drops duplicates. Partitions that come sorted
// (what a client reports, as a rule) cost one pass.
func sortTPs(tps []TopicPartition) []TopicPartition {
	for i := 1; i < len(tps); i++ {
		if compareTP(tps[i-1], tps[i]) >= 0 {
			slices.SortFunc(tps, compareTP)
			return slices.Compact(tps)
		}
	}
	return tps
}

// withoutTokens returns the partitions of ps.
func withoutTokens(ps []OwnedPartition) []TopicPartition {
	if len(ps) == 0 {
		return nil
	}
	out := make([]TopicPartition, len(ps))
	for i, p := range ps {
		out[i] = TopicPartition{p.Topic, p.Partition}
	}
	return out
}

// subsetOfOwned reports whether every partition of tps (sorted) is in ps.
func subsetOfOwned(tps []TopicPartition, ps []OwnedPartition) bool {
	for _, tp := range tps {
		if !containsOwned(ps, tp) {
			return false
		}
	}
	return true
}

// sortedStrings reports whether ss is strictly increasing.
func sortedStrings(ss []string) bool {
	for i := 1; i < len(ss); i++ {
		if strings.Compare(ss[i-1], ss[i]) >= 0 {
			return false
		}
	}
	return true
}

// normalizeNames returns ss sorted without duplicates, reusing ss when it
// already is.
func normalizeNames(ss []string) []string {
	if sortedStrings(ss) {
		return ss
	}
	out := slices.Clone(ss)
	slices.Sort(out)
	return slices.Compact(out)
}

// mergeOwned returns the union of the sorted a and b (which must be
// disjoint), sorted, in new memory.
func mergeOwned(a, b []OwnedPartition) []OwnedPartition {
	out := make([]OwnedPartition, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if compareOwned(a[0], b[0]) < 0 {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	out = append(out, a...)
	return append(out, b...)
}
