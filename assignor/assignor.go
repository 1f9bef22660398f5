package assignor

import "errors"

// TopicPartition names one partition of one topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Member is one member of the group as the assignor sees it.
//
// Topics nil and Topics empty differ: nil subscribes to everything, an empty
// slice to nothing. Names in Topics or Owned that are not in Input.Topics are
// ignored, as are Owned partitions out of range or of topics the member does
// not subscribe to. Rack is carried for callers; no assignor uses it yet.
type Member struct {
	// ID is the member ID; unique within the input.
	ID string
	// InstanceID is the static membership ID (KIP-345), if any.
	InstanceID string
	// Rack is the member's rack, if known.
	Rack string
	// Topics is the member's subscription. Nil means every topic in the input.
	Topics []string
	// Owned is what the member holds now; sticky assignors keep as much of
	// it as balance allows. Partitions of unknown topics are ignored.
	Owned []TopicPartition
}

// Topic is one topic to assign, with its partitions 0..Partitions-1.
type Topic struct {
	Name       string
	Partitions int32
}

// Input is everything an assignor decides from. The order of Members, of
// Topics and of each member's Topics and Owned does not matter: the same
// set gives the same Assignment.
type Input struct {
	Members []Member
	Topics  []Topic
}

// Assignment maps each member ID to its partitions, sorted by topic, then
// partition. Every member of the input has an entry (possibly empty), and
// every partition of a subscribed topic appears exactly once. Partitions of
// a topic that no member subscribes to appear nowhere: they stay unassigned
// until someone subscribes.
//
// The slices of one Assignment share a backing array, each capped at its
// length, so appending to one never writes into another.
type Assignment map[string][]TopicPartition

// Assignor computes an Assignment from an Input.
type Assignor interface {
	// Name is the protocol name clients ask for ("uniform", "range", ...).
	Name() string
	// Assign returns the assignment for in, or an error wrapping
	// ErrInvalidInput.
	Assign(in Input) (Assignment, error)
}

// ErrInvalidInput is wrapped by every error an assignor returns for an input
// it cannot assign (a duplicate member ID or topic name, a negative partition
// count, more than MaxPartitions partitions) or, for Rendezvous, for an
// invalid epsilon. Test for it with errors.Is; the message names the culprit.
var ErrInvalidInput = errors.New("assignor: invalid input")
