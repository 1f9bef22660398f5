package etcdstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// The fence: why a failed Persist writes nothing afterwards.
//
// store.Store promises that once Persist has returned an error, nothing of
// its records is written: a reader that comes after sees the final
// outcome. An etcd write can fail with its outcome unknown: the caller's
// deadline passes, the connection drops after the request was sent, or the
// server gives up waiting for the proposal it made (v3_server.go,
// processInternalRaftRequestOnce, returns ErrTimeout while the proposal is
// still in raft). The request may still be applied later, after Persist
// returned.
//
// etcd does not order a client's requests for us: the server handles each
// request in its own goroutine and proposes it to raft from there
// (processInternalRaftRequestOnce), so a request the client gave up on can
// be proposed after one it sent later. What etcd does give is one total
// order of writes, the raft log, in which every transaction's comparisons
// are evaluated at apply time against the state the log has built so far
// (server/etcdserver/txn/txn.go, Txn: "writes are serialized on the raft
// loop"), and an answer to a write only once it is applied (the server
// waits on s.w for the entry's apply, which triggers it in
// applyEntryNormal, server.go). And revisions only grow, so a key's
// ModRevision never takes an old value again.
//
// So every write transaction compares the ModRevision of the key
// <prefix>meta/fence with the revision the store last knew, F. After a
// write of unknown outcome, the store moves the fence: a transaction
// If(ModRevision(fence) = F) Then(Put(fence)) Else(Get(fence)), repeated
// until it is answered. Once it is, the fence's ModRevision is above F:
// every transaction comparing F that was ordered before the fence move is
// applied already, and every one ordered after it fails its comparison and
// writes nothing. The outcome is final. If the fence was moved by someone
// else in the meantime (the Else branch shows a revision other than F),
// the outcome is just as final.
//
// etcd's definite refusals (too many operations, a duplicate key, a request
// too large, no space, permission denied: knownRejection) were not applied
// and need no fence; any other error counts as unknown.
//
// Persist tries for FenceTimeout, on a context detached from its own
// (which is often the deadline that failed). If the fence cannot be moved
// in time, the store is unsettled: every later Persist and load first
// moves the fence, and fails with ErrUnsettled until it can, so that no
// reader of this store sees a state that a late write could still change.
//
// The guard (Guard) is part of every comparison, the fence move's too: a
// store whose guard failed (its leadership is gone) must not move the
// fence of the store that succeeded it. When the guard fails and the fence
// cannot be moved, the guard settles the outcome instead, because it is
// monotone: a late write fails it as well.
//
// New takes the fence over by writing it unconditionally with its own ID,
// so nothing that an earlier store on the prefix (a crashed process) had
// in flight can land after a new store has opened. An open store that
// finds the fence moved by another store's ID stops writing (ErrFenced):
// one writer per prefix. When it finds its own ID there at a new revision
// (a fence move it had given up on that landed after all), it takes the
// new revision and retries: its older transactions compare older
// revisions, so they stay fenced.

// ErrGuardFailed is returned by Persist (and New) when a comparison given
// with Guard does not hold: the transaction wrote nothing. Earlier
// transactions of the same Persist may have been written.
var ErrGuardFailed = errors.New("etcdstore: guard comparison failed; nothing written")

// ErrFenced is returned by Persist when another store opened the same
// prefix (the same shard of it) after this one: this store writes nothing
// more.
var ErrFenced = errors.New("etcdstore: another store took over the prefix")

// ErrUnsettled is returned by Persist and the loads while the outcome of
// an earlier write is unknown and the fence could not be moved yet (the
// etcd cluster is unreachable); they try again each time.
var ErrUnsettled = errors.New("etcdstore: the outcome of a failed write is not settled yet")

// fenceValue is the fence key's value: who wrote it, for ErrFenced and
// for operators.
type fenceValue struct {
	ID   string `json:"id"`
	Host string `json:"host,omitempty"`
	PID  int    `json:"pid,omitempty"`
	At   string `json:"at,omitempty"`
}

func newFenceValue() (fenceValue, error) {
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return fenceValue{}, err
	}
	host, _ := os.Hostname()
	return fenceValue{ID: hex.EncodeToString(id[:]), Host: host, PID: os.Getpid()}, nil
}

func (f fenceValue) encode() string {
	f.At = time.Now().UTC().Format(time.RFC3339Nano)
	b, _ := json.Marshal(f) // strings and an int
	return string(b)
}

// fenceState is the fence as the store knows it; guarded by Store.wmu.
type fenceState struct {
	rev int64 // the fence key's ModRevision every write compares
	// unsettled: a write's outcome is unknown and the fence has not moved
	// since.
	unsettled bool
	// fencedBy is the value another store wrote to the fence, once this
	// store has seen it: it writes nothing more.
	fencedBy *fenceValue
}

// readFence reads the fence key's revision and value from a transaction's
// Else branch, whose one operation is Get(fence).
func readFence(resp *clientv3.TxnResponse) (rev int64, v fenceValue, ok bool) {
	if len(resp.Responses) != 1 {
		return 0, v, false
	}
	rr := resp.Responses[0].GetResponseRange()
	if rr == nil || len(rr.Kvs) != 1 {
		return 0, v, rr != nil // a missing fence key has revision 0
	}
	kv := rr.Kvs[0]
	if json.Unmarshal(kv.Value, &v) != nil {
		v = fenceValue{ID: "unreadable: " + string(kv.Value)}
	}
	return kv.ModRevision, v, true
}

// writeCmps are the comparisons of a write at the fence revision the
// store knows. Holds wmu.
func (s *Store) writeCmps() []clientv3.Cmp { return s.writeCmpsAt(s.fence.rev) }

// writeCmpsAt are the comparisons of a write at fence revision rev.
func (s *Store) writeCmpsAt(rev int64) []clientv3.Cmp {
	cmps := make([]clientv3.Cmp, 0, len(s.cfg.guard)+1)
	cmps = append(cmps, s.cfg.guard...)
	return append(cmps, clientv3.Compare(clientv3.ModRevision(s.keys.fence()), "=", rev))
}

// movedSince handles a write that found the fence at frev with value v,
// not at the revision it compared: a move of this store's that it knows
// already (a concurrent write settled) needs nothing; otherwise it is
// moved's to judge. The caller writes again at the store's revision.
// Holds wmu.
func (s *Store) movedSince(frev int64, v fenceValue) error {
	if s.fence.fencedBy != nil {
		return s.fencedErr()
	}
	if v.ID == s.self.ID && frev <= s.fence.rev {
		return nil
	}
	return s.moved(frev, v)
}

// moved handles a fence found at rev with value v, other than the
// store's: the store's own late fence move is adopted, another store's
// fences this one. Holds wmu.
func (s *Store) moved(rev int64, v fenceValue) error {
	if v.ID == s.self.ID {
		s.cfg.log.Warn("etcd store: a fence move given up on landed later; adopting it",
			zap.Int64("old_revision", s.fence.rev), zap.Int64("revision", rev))
		s.fence.rev = rev
		return nil
	}
	s.fence.fencedBy = &v
	s.cfg.log.Error("etcd store: another store took over the prefix; writing nothing more",
		zap.String("prefix", s.cfg.prefix), zap.Int("shard", s.cfg.shard), zap.String("by_id", v.ID), zap.String("by_host", v.Host),
		zap.Int("by_pid", v.PID), zap.String("at", v.At))
	return s.fencedErr()
}

func (s *Store) fencedErr() error {
	v := s.fence.fencedBy
	return fmt.Errorf("%w (store %s of %s pid %d, at %s)", ErrFenced, v.ID, v.Host, v.PID, v.At)
}

// settle moves the fence after a write of unknown outcome, trying until
// it is answered, ctx ends or the store closes. Holds wmu.
func (s *Store) settle(ctx context.Context) error {
	if !s.fence.unsettled {
		return nil
	}
	backoff := 10 * time.Millisecond
	for {
		resp, err := s.cli.Txn(ctx).If(s.writeCmps()...).
			Then(clientv3.OpPut(s.keys.fence(), s.self.encode())).
			Else(clientv3.OpGet(s.keys.fence())).Commit()
		if err == nil {
			s.fence.unsettled = false
			if resp.Succeeded {
				s.cfg.log.Info("etcd store: fence moved; the failed write's outcome is final",
					zap.Int64("old_revision", s.fence.rev), zap.Int64("revision", resp.Header.Revision))
				s.fence.rev = resp.Header.Revision
				return nil
			}
			rev, v, ok := readFence(resp)
			switch {
			case !ok:
				s.fence.unsettled = true
				err = errors.New("etcdstore: unexpected response to the fence transaction")
			case rev != s.fence.rev:
				return s.moved(rev, v)
			default:
				// The guard failed; being monotone, it fences the late
				// write too.
				return ErrGuardFailed
			}
		}
		s.metrics.failed(opFence, err)
		s.cfg.log.Warn("etcd store: cannot move the fence yet", zap.Error(err), zap.Duration("retry_in", backoff))
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: %w", ErrUnsettled, errors.Join(err, context.Cause(ctx)))
		case <-t.C:
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// knownRejection reports whether err says etcd refused the request without
// applying it: the write is settled, nothing needs fencing.
func knownRejection(err error) bool {
	for _, known := range []error{
		rpctypes.ErrTooManyOps, rpctypes.ErrDuplicateKey, rpctypes.ErrRequestTooLarge,
		rpctypes.ErrEmptyKey, rpctypes.ErrNoSpace, rpctypes.ErrPermissionDenied,
		// Refused before it was proposed (busy.go).
		rpctypes.ErrTooManyRequests,
	} {
		if errors.Is(err, known) {
			return true
		}
	}
	return false
}
