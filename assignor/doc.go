// Package assignor holds tenure's partition assignors: pure, deterministic
// functions from a group's members and topics to an assignment in which every
// partition has exactly one owner.
//
// # Using an assignor
//
// Describe the group as an Input — its members (ID, optional static
// InstanceID, subscription, what each holds now) and its topics with their
// partition counts — and call Assign:
//
//	a, _ := assignor.ByName("uniform")
//	out, err := a.Assign(assignor.Input{
//		Topics:  []assignor.Topic{{Name: "events", Partitions: 64}},
//		Members: []assignor.Member{{ID: "m1", Owned: held["m1"]}, {ID: "m2"}},
//	})
//
// The result maps every member to its partitions, sorted by topic and
// partition; a member whose subscription matches nothing gets an empty,
// non-nil slice, and partitions of topics nobody subscribes to are left out.
// The same input in any order (of members, topics, subscriptions, owned
// partitions) gives the same output. Invalid input (duplicate member IDs or
// topic names, negative partition counts, more than MaxPartitions) gives an
// error wrapping ErrInvalidInput and no assignment. Assign does no I/O and
// keeps no state; assignors are safe for concurrent use.
//
// # Which to pick
//
// Uniform ("uniform", the default) is sticky and balanced: with homogeneous
// subscriptions every member gets ⌊P/n⌋ or ⌈P/n⌉ partitions and a join, a
// leave or a crash moves only as many partitions as balance requires. It
// needs what members hold (Member.Owned) to be sticky; with nothing held it
// deals contiguous blocks. Pick it unless you have a reason not to.
//
// Range ("range") is Kafka's range assignor: per topic, contiguous ranges in
// member order. It ignores what members hold, so many partitions move when
// membership changes, and with many topics it loads the first members more.
// Pick it for co-partitioned topics (joins on the partition number) or for
// compatibility with Kafka clients' range assignment.
//
// Rendezvous ("rendezvous") is consistent hashing with bounded loads: each
// partition's owner follows from the member set alone, with no member above
// ⌈⌈P/n⌉·(1+ε)⌉. Pick it when placement must not depend on history (any
// node can recompute it, a restarted static member lands on the same
// partitions); it moves more partitions than Uniform on a change.
//
// # Measuring
//
// Imbalance reports the spread of an assignment (0 or 1 for Uniform on a
// homogeneous group); Moves counts the partitions that changed owner between
// two assignments, which is what a rebalance costs the consumers.
//
// # Kafka clients
//
// Package kgobalancer wraps the assignors as franz-go kgo.GroupBalancers,
// so classic consumer groups can use them, on tenure or on Kafka itself.
// It is a package of its own so that this one, which the coordinator's
// core imports, does not bring the Kafka client in.
package assignor
