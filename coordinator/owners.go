package coordinator

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tenure-dev/tenure/epoch"
)

// owner is who holds a partition and under which token.
type owner struct {
	member string
	token  epoch.Token
}

// ownership is the coordinator's view of who owns each partition, shared by
// both protocols. Its invariant, which every test checks, is that a
// partition has at most one current owner; tokens only grow because they
// are epochs, and the epoch only grows.
//
// A partition that was released stays remembered with its last owner, so
// that owner's hand-off commit (made while revoking, before anyone else was
// given the partition) is still accepted under its token.
type ownership struct {
	cur  map[TopicPartition]owner
	last map[TopicPartition]owner
	// changed, if set, hears every grant and release (the generation
	// log's hand-off timing).
	changed func(tp TopicPartition, member string, granted bool)
}

func (o *ownership) init() {
	o.cur = make(map[TopicPartition]owner)
	o.last = make(map[TopicPartition]owner)
}

// assign makes member the owner of tp under token. The partition must be
// unowned or already owned by member under the same token: handing out a
// partition that someone else still holds is exactly the bug tenure exists
// to prevent, so it panics.
func (o *ownership) assign(tp TopicPartition, member string, token epoch.Token) {
	if cur, ok := o.cur[tp]; ok {
		if cur.member == member && cur.token == token {
			return
		}
		panic(fmt.Sprintf("coordinator: assigning %s[%d] to %s at token %v while %s owns it at token %v",
			tp.Topic, tp.Partition, member, token, cur.member, cur.token))
	}
	if last, ok := o.last[tp]; ok && token < last.token {
		panic(fmt.Sprintf("coordinator: assigning %s[%d] at token %v below its last token %v",
			tp.Topic, tp.Partition, token, last.token))
	}
	delete(o.last, tp)
	o.cur[tp] = owner{member, token}
	if o.changed != nil {
		o.changed(tp, member, true)
	}
}

// retoken changes the token under which member holds tp: a KIP-848
// partition's token is fixed only once its owner reports it
// (consumer_tokens.go). The caller keeps the token at or above the epoch
// at which member was given tp, so it stays above every earlier owner's.
// It panics if member does not own tp.
func (o *ownership) retoken(tp TopicPartition, member string, token epoch.Token) {
	cur, ok := o.cur[tp]
	if !ok || cur.member != member {
		panic(fmt.Sprintf("coordinator: retoken of %s[%d] by %s, which does not own it", tp.Topic, tp.Partition, member))
	}
	o.cur[tp] = owner{member, token}
}

// release ends member's ownership of tp; it is a no-op if member does not
// own tp.
func (o *ownership) release(tp TopicPartition, member string) {
	if cur, ok := o.cur[tp]; ok && cur.member == member {
		delete(o.cur, tp)
		o.last[tp] = cur
		if o.changed != nil {
			o.changed(tp, member, false)
		}
	}
}

// lastOwner returns the owner of tp, or, if it has none, its last owner.
func (o *ownership) lastOwner(tp TopicPartition) (owner, bool) {
	if cur, ok := o.cur[tp]; ok {
		return cur, true
	}
	last, ok := o.last[tp]
	return last, ok
}

// owner returns the current owner of tp.
func (o *ownership) owner(tp TopicPartition) (owner, bool) {
	cur, ok := o.cur[tp]
	return cur, ok
}

// commitToken returns the token under which member may commit tp: its own
// token if it owns tp, or its last token if it was the last owner and
// nobody has been given tp since (a hand-off commit). ok is false if member
// may not commit tp.
func (o *ownership) commitToken(tp TopicPartition, member string) (epoch.Token, bool) {
	if cur, ok := o.cur[tp]; ok {
		return cur.token, cur.member == member
	}
	if last, ok := o.last[tp]; ok && last.member == member {
		return last.token, true
	}
	return epoch.None, false
}

// owned returns the number of partitions with a current owner.
func (o *ownership) owned() int { return len(o.cur) }

func (o *ownership) writeTo(b *strings.Builder) {
	if len(o.cur) == 0 {
		return
	}
	tps := make([]TopicPartition, 0, len(o.cur))
	for tp := range o.cur {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, compareTP)
	b.WriteString("owners:\n")
	for _, tp := range tps {
		cur := o.cur[tp]
		fmt.Fprintf(b, "  %s[%d] %s token=%v\n", tp.Topic, tp.Partition, cur.member, cur.token)
	}
}

func compareTP(a, b TopicPartition) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return int(a.Partition) - int(b.Partition)
}
