package etcdstore_test

import (
	"time"

	"pgregory.net/rapid"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/epoch"
)

// Generators of records with every field drawn, for the property tests.
// Names come from small pools, so that records of one entity replace each
// other, and include the awkward ones: empty, with '/' and '%', escapes
// that look like other names, and bytes that are not UTF-8.

var awkward = []string{"", "/", "a/b", "a%2Fb", "%", "%25", "é", "\xff\xfe", "a b", "a.b", "~x", "A"}

// pool draws a name from a few plain names and the awkward ones.
func pool(plain ...string) *rapid.Generator[string] {
	return rapid.SampledFrom(append(plain, awkward...))
}

// anyString draws any string: valid UTF-8 or arbitrary bytes.
var anyString = rapid.OneOf(
	rapid.SampledFrom(append([]string{"range", "cooperative-sticky", "consumer", "Stable"}, awkward...)),
	rapid.String(),
	rapid.Map(rapid.SliceOfN(rapid.Byte(), 0, 6), func(b []byte) string { return string(b) }),
)

// maybeNil draws nil, an empty slice or a short one.
func maybeNil[T any](g *rapid.Generator[T]) *rapid.Generator[[]T] {
	return rapid.Custom(func(t *rapid.T) []T {
		switch rapid.IntRange(0, 3).Draw(t, "shape") {
		case 0:
			return nil
		case 1:
			return []T{}
		}
		return rapid.SliceOfN(g, 1, 5).Draw(t, "elems")
	})
}

var anyBytes = rapid.Custom(func(t *rapid.T) []byte {
	switch rapid.IntRange(0, 2).Draw(t, "shape") {
	case 0:
		return nil
	case 1:
		return []byte{}
	}
	return rapid.SliceOfN(rapid.Byte(), 1, 12).Draw(t, "bytes")
})

var anyToken = rapid.Custom(func(t *rapid.T) epoch.Token {
	return epoch.Token(rapid.OneOf(rapid.Int64Range(-2, 40), rapid.Int64()).Draw(t, "token"))
})

var anyInt32 = rapid.OneOf(rapid.Int32Range(-2, 40), rapid.Int32())

// names are the pools of one property run.
type names struct {
	groups, members, topics *rapid.Generator[string]
	partitions              *rapid.Generator[int32]
}

func smallNames() names {
	return names{
		groups:     pool("g", "h"),
		members:    pool("m1", "m2", "consumer-1-0c9a1a6e-4b1b-4c39-a8f2-7a0d0e2f5c11"),
		topics:     pool("t", "jobs"),
		partitions: rapid.OneOf(rapid.Int32Range(0, 3), rapid.SampledFrom([]int32{9, 10, 100, -1, 1<<31 - 1})),
	}
}

func (n names) groupRecord() *rapid.Generator[*coordinator.GroupRecord] {
	return rapid.Custom(func(t *rapid.T) *coordinator.GroupRecord {
		return &coordinator.GroupRecord{
			Group:        n.groups.Draw(t, "group"),
			Type:         coordinator.GroupType(rapid.Uint8Range(0, 3).Draw(t, "type")),
			Epoch:        anyInt32.Draw(t, "epoch"),
			ProtocolType: anyString.Draw(t, "ptype"),
			Protocol:     anyString.Draw(t, "protocol"),
			Leader:       anyString.Draw(t, "leader"),
			State:        anyString.Draw(t, "state"),
			Deleted:      rapid.IntRange(0, 4).Draw(t, "deleted") == 0,
		}
	})
}

func (n names) memberRecord() *rapid.Generator[*coordinator.MemberRecord] {
	protocol := rapid.Custom(func(t *rapid.T) coordinator.Protocol {
		return coordinator.Protocol{Name: anyString.Draw(t, "name"), Metadata: anyBytes.Draw(t, "metadata")}
	})
	return rapid.Custom(func(t *rapid.T) *coordinator.MemberRecord {
		return &coordinator.MemberRecord{
			Group:            n.groups.Draw(t, "group"),
			MemberID:         n.members.Draw(t, "member"),
			InstanceID:       anyString.Draw(t, "instance"),
			ClientID:         anyString.Draw(t, "client"),
			ClientHost:       anyString.Draw(t, "host"),
			RackID:           anyString.Draw(t, "rack"),
			SessionTimeout:   time.Duration(rapid.Int64().Draw(t, "session")),
			RebalanceTimeout: time.Duration(rapid.Int64Range(0, 1e12).Draw(t, "rebalance")),
			Topics:           maybeNil(anyString).Draw(t, "topics"),
			TopicRegex:       anyString.Draw(t, "regex"),
			ServerAssignor:   anyString.Draw(t, "assignor"),
			Protocols:        maybeNil(protocol).Draw(t, "protocols"),
			Deleted:          rapid.IntRange(0, 4).Draw(t, "deleted") == 0,
		}
	})
}

func (n names) assignmentRecord() *rapid.Generator[*coordinator.AssignmentRecord] {
	owned := rapid.Custom(func(t *rapid.T) coordinator.OwnedPartition {
		return coordinator.OwnedPartition{Topic: n.topics.Draw(t, "topic"), Partition: n.partitions.Draw(t, "p"), Token: anyToken.Draw(t, "token")}
	})
	prov := rapid.Custom(func(t *rapid.T) coordinator.ProvisionalPartition {
		return coordinator.ProvisionalPartition{Topic: n.topics.Draw(t, "topic"), Partition: n.partitions.Draw(t, "p"), Floor: anyToken.Draw(t, "floor")}
	})
	tp := rapid.Custom(func(t *rapid.T) coordinator.TopicPartition {
		return coordinator.TopicPartition{Topic: n.topics.Draw(t, "topic"), Partition: n.partitions.Draw(t, "p")}
	})
	return rapid.Custom(func(t *rapid.T) *coordinator.AssignmentRecord {
		return &coordinator.AssignmentRecord{
			Group:       n.groups.Draw(t, "group"),
			MemberID:    n.members.Draw(t, "member"),
			MemberEpoch: anyInt32.Draw(t, "epoch"),
			PrevEpoch:   anyInt32.Draw(t, "prev"),
			Owned:       maybeNil(owned).Draw(t, "owned"),
			Provisional: maybeNil(prov).Draw(t, "provisional"),
			Pending:     maybeNil(tp).Draw(t, "pending"),
			Revoking:    maybeNil(tp).Draw(t, "revoking"),
			Target:      maybeNil(tp).Draw(t, "target"),
			Raw:         anyBytes.Draw(t, "raw"),
		}
	})
}

func (n names) offsetRecord() *rapid.Generator[*coordinator.OffsetRecord] {
	return rapid.Custom(func(t *rapid.T) *coordinator.OffsetRecord {
		r := &coordinator.OffsetRecord{
			Group:       n.groups.Draw(t, "group"),
			Topic:       n.topics.Draw(t, "topic"),
			Partition:   n.partitions.Draw(t, "partition"),
			Offset:      rapid.Int64().Draw(t, "offset"),
			LeaderEpoch: anyInt32.Draw(t, "leader-epoch"),
			Token:       anyToken.Draw(t, "token"),
			MemberID:    anyString.Draw(t, "by"),
			Deleted:     rapid.IntRange(0, 4).Draw(t, "deleted") == 0,
		}
		if rapid.Bool().Draw(t, "has-metadata") {
			md := anyString.Draw(t, "metadata")
			r.Metadata = &md
		}
		return r
	})
}

func (n names) topicRecord() *rapid.Generator[*coordinator.TopicRecord] {
	return rapid.Custom(func(t *rapid.T) *coordinator.TopicRecord {
		r := &coordinator.TopicRecord{
			Name:       n.topics.Draw(t, "name"),
			Partitions: anyInt32.Draw(t, "partitions"),
			Deleted:    rapid.IntRange(0, 4).Draw(t, "deleted") == 0,
		}
		if rapid.Bool().Draw(t, "has-id") {
			copy(r.ID[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "id"))
		}
		return r
	})
}

// record draws a record of any type.
func (n names) record() *rapid.Generator[coordinator.Record] {
	return rapid.OneOf(
		rapid.Map(n.groupRecord(), func(r *coordinator.GroupRecord) coordinator.Record { return r }),
		rapid.Map(n.memberRecord(), func(r *coordinator.MemberRecord) coordinator.Record { return r }),
		rapid.Map(n.memberRecord(), func(r *coordinator.MemberRecord) coordinator.Record { return r }),
		rapid.Map(n.assignmentRecord(), func(r *coordinator.AssignmentRecord) coordinator.Record { return r }),
		rapid.Map(n.offsetRecord(), func(r *coordinator.OffsetRecord) coordinator.Record { return r }),
		rapid.Map(n.offsetRecord(), func(r *coordinator.OffsetRecord) coordinator.Record { return r }),
		rapid.Map(n.topicRecord(), func(r *coordinator.TopicRecord) coordinator.Record { return r }),
	)
}
