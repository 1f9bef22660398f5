package server

import (
	"slices"

	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator"
)

// How a group's replies wait for its writes (raft's rule for asynchronous
// storage writes): every Ready with records is one write, numbered by the
// group (issued); the writer acknowledges them in order (durable). A reply
// may reveal anything its group decided up to its Ready, so it is held
// until every write issued before it is durable; when none is in flight it
// goes out at once, which is the common case of a heartbeat that changed
// nothing. Reads (OffsetFetch, DescribeGroups, ConsumerGroupDescribe,
// DeleteGroups) wait the same way before they answer.

// barrier is a read waiting for its group's writes up to seq; done gets
// nil once they are durable, or the error that took the group offline.
type barrier struct {
	seq  uint64
	done chan error
}

// queueWrite hands recs, the records of one Ready, to the writer. e.mu
// must be held.
func (s *Server) queueWrite(e *groupEntry, recs []coordinator.Record) {
	e.issued++
	e.inflight++
	seq, inc := e.issued, e.inc
	e.tm.writer.submit(&write{
		recs:  recs,
		group: e,
		live: func() bool {
			e.mu.Lock()
			defer e.mu.Unlock()
			return e.inc == inc
		},
		done: func(err error) { s.written(e, seq, inc, err) },
	})
}

// written is the writer's acknowledgement of write seq of e's core inc.
func (s *Server) written(e *groupEntry, seq, inc uint64, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.inflight--
	if inc != e.inc {
		// The core that wrote this is gone; whoever dropped it answered
		// what waited on it.
		return
	}
	if err != nil {
		s.takeOffline(e, "store write failed", zap.Error(err))
		return
	}
	s.landed(e, seq)
	s.release(e)
	if e.g != nil && e.g.Deleted() && e.durable == e.issued && !e.gone {
		e.tm.groups.remove(e)
	}
}

// landed records that write seq of e is durable, and moves e.durable as
// far as every write up to it is. e.mu must be held.
func (s *Server) landed(e *groupEntry, seq uint64) {
	if seq != e.durable+1 {
		i, _ := slices.BinarySearch(e.landed, seq)
		e.landed = slices.Insert(e.landed, i, seq)
		return
	}
	e.durable = seq
	n := 0
	for n < len(e.landed) && e.landed[n] == e.durable+1 {
		e.durable++
		n++
	}
	e.landed = shift(e.landed, n)
}

// release sends the held replies and ends the barriers that e's durable
// writes now cover. e.mu must be held.
func (s *Server) release(e *groupEntry) {
	held := e.waiting.items()
	n := 0
	for n < len(held) && held[n].seq <= e.durable {
		s.reply(e.tm, held[n].r, nil)
		n++
	}
	e.waiting.drop(n)
	reads := e.barriers.items()
	n = 0
	for n < len(reads) && reads[n].seq <= e.durable {
		reads[n].done <- nil
		n++
	}
	e.barriers.drop(n)
}

// shift drops the first n elements of s, keeping its memory.
func shift[T any](s []T, n int) []T {
	if n == 0 {
		return s
	}
	k := copy(s, s[n:])
	clear(s[k:])
	return s[:k]
}

// waitDurable returns a channel that gets nil once every write e has
// issued so far is durable, or nil if none is in flight. e.mu must be
// held.
func (s *Server) waitDurable(e *groupEntry) <-chan error {
	if e.durable == e.issued {
		return nil
	}
	ch := make(chan error, 1)
	e.barriers.push(barrier{seq: e.issued, done: ch})
	return ch
}
