package e2e

import (
	"fmt"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fleetLoad turns a fleet into a load generator of chosen rate, for the
// capacity benchmark: every member heartbeats every period (instead of the
// interval the coordinator gives, which a member may beat early) and, with
// commits on, commits its partitions' offsets with each heartbeat (KIP-848
// OffsetCommit v9, its member epoch as generation). Every answer's round
// trip, from the request's queueing to its answer, goes into hbLatency or
// commitLatency: a commit waits for the store's fsync and a heartbeat
// does not, so their tails are told apart.
type fleetLoad struct {
	period  atomic.Int64 // time.Duration; 0: the coordinator's interval
	commits atomic.Bool
	// commitEvery, above 1, makes a member commit with every
	// commitEvery-th of its heartbeats only, the members staggered, as
	// consumers whose auto-commit interval is longer than their
	// heartbeat interval do.
	commitEvery atomic.Int64

	commitsOK   atomic.Int64
	commitsFail atomic.Int64
	offset      atomic.Int64 // the offset committed next, fleet-wide

	hbLatency, commitLatency latencyHist
}

// commitDue reports whether m's heartbeat, about to be sent, takes a
// commit with it (commits on, and its turn: commitEvery). The lane's lock
// is held.
func (l *fleetLoad) commitDue(m *fleetMember) bool {
	if !l.commits.Load() || len(m.owned) == 0 {
		return false
	}
	m.beats++
	every := uint64(max(1, l.commitEvery.Load()))
	return (m.beats+m.seq)%every == 0
}

// commit sends an OffsetCommit of every partition m owns to node, after
// m's heartbeat sent at now. The lane's lock is held.
func (l *fleetLane) commit(m *fleetMember, node int, now time.Duration) {
	f := l.f
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 9
	req.Group = m.g.name
	req.MemberID = m.id
	req.Generation = m.epoch
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = f.cfg.topic
	off := f.load.offset.Add(1)
	for _, p := range m.owned {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, off
		t.Partitions = append(t.Partitions, rp)
	}
	req.Topics = append(req.Topics, t)
	err := l.wires[node].send(req, func(resp kmsg.Response, err error) {
		f.load.commitLatency.record(time.Since(f.base) - now)
		ok := err == nil
		if ok {
			for _, t := range resp.(*kmsg.OffsetCommitResponse).Topics {
				for _, p := range t.Partitions {
					ok = ok && p.ErrorCode == 0
				}
			}
		}
		if ok {
			f.load.commitsOK.Add(1)
		} else {
			f.load.commitsFail.Add(1)
		}
		if f.stopped.Load() {
			return
		}
		l.mu.Lock()
		if l.inFlight == f.cfg.inFlight {
			l.kick()
		}
		l.inFlight--
		l.mu.Unlock()
	})
	if err != nil {
		f.load.commitsFail.Add(1)
		return
	}
	l.inFlight++
}

// latencyHist counts round trips in buckets of a quarter of a binary order
// of magnitude, in microseconds: lock-free, for the lanes' readers to
// record into at full rate.
type latencyHist struct {
	buckets [64 * 4]atomic.Int64
}

func latencyBucket(d time.Duration) int {
	us := uint64(max(d.Microseconds(), 1))
	n := bits.Len64(us) // us in [2^(n-1), 2^n)
	frac := 0
	if n >= 3 {
		frac = int(us>>(n-3)) & 3 // the two bits after the leading one
	}
	return (n-1)*4 + frac
}

// latencyUpper is the upper bound of bucket i.
func latencyUpper(i int) time.Duration {
	n, frac := i/4+1, i%4
	if n < 3 {
		return time.Duration(1<<n) * time.Microsecond
	}
	lo := uint64(1)<<(n-1) + uint64(frac)<<(n-3)
	return time.Duration(lo+uint64(1)<<(n-3)) * time.Microsecond
}

func (h *latencyHist) record(d time.Duration) { h.buckets[latencyBucket(d)].Add(1) }

// snapshot copies the counts.
func (h *latencyHist) snapshot() []int64 {
	out := make([]int64, len(h.buckets))
	for i := range h.buckets {
		out[i] = h.buckets[i].Load()
	}
	return out
}

// latencyQuantile returns the q quantile (an upper bound) of the round
// trips counted between two snapshots, and their count.
func latencyQuantile(before, after []int64, q float64) (time.Duration, int64) {
	var total int64
	for i := range after {
		total += after[i] - before[i]
	}
	if total == 0 {
		return 0, 0
	}
	want := int64(float64(total) * q)
	var seen int64
	for i := range after {
		seen += after[i] - before[i]
		if seen > want {
			return latencyUpper(i), total
		}
	}
	return latencyUpper(len(after) - 1), total
}

// latencies describes the round trips counted between two snapshots:
// their p50, p99 and max (upper bounds) and count.
func latencies(before, after []int64) string {
	p50, n := latencyQuantile(before, after, 0.5)
	p99, _ := latencyQuantile(before, after, 0.99)
	var top time.Duration
	for i := len(after) - 1; i >= 0; i-- {
		if after[i] > before[i] {
			top = latencyUpper(i)
			break
		}
	}
	return fmt.Sprintf("%v/%v/%v of %d", p50, p99, top, n)
}
