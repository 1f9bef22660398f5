//go:build unix

package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/internal/chaos/check"
)

// CommitterConfig configures [RunCommitter].
type CommitterConfig struct {
	// Name is the committer's name in its log lines ("c0").
	Name string
	// ClientOpts configure the kgo client: the seed brokers and the dialer.
	ClientOpts []kgo.Opt
	// Group and Topic are the group to join and the topic to consume.
	Group, Topic string
	// Classic joins with the classic protocol (JoinGroup/SyncGroup, the
	// cooperative-sticky balancer, kgo's default sessions) instead of
	// KIP-848.
	Classic bool
	// Partitions is the topic's partition count: every fetch reads them all.
	Partitions int32
	// Interval spaces the commits of each owned partition; a fetch of
	// every partition comes every FetchEvery commits.
	Interval   time.Duration
	FetchEvery int
	// Log receives one check.OffsetOp a line, for each partition of each
	// commit and fetch, and one check.Callback a line for each partition
	// of each call of a rebalance callback.
	Log io.Writer
	// Logger receives the client's own log.
	Logger *zap.Logger
}

// RunCommitter runs a stock kgo consumer that joins cfg.Group with KIP-848
// (the server-side assignor), or the classic protocol, and commits, for every partition it is
// assigned, an offset one above the last it knew of every cfg.Interval,
// logging each commit and fetch with its real-time interval and outcome:
// the coordinator-side half of the fence, seen from a client the project
// did not write. It returns when ctx ends, after leaving the group.
func RunCommitter(ctx context.Context, cfg CommitterConfig) error {
	if cfg.Interval <= 0 {
		cfg.Interval = 50 * time.Millisecond
	}
	if cfg.FetchEvery <= 0 {
		cfg.FetchEvery = 10
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	c := &committer{cfg: cfg, owned: map[int32]int64{}, enc: json.NewEncoder(cfg.Log)}
	balancer := kgo.ServerSideBalancer()
	if cfg.Classic {
		balancer = kgo.Balancers(kgo.CooperativeStickyBalancer())
	}
	opts := append([]kgo.Opt{
		kgo.ConsumerGroup(cfg.Group), kgo.ConsumeTopics(cfg.Topic), balancer,
		kgo.DisableAutoCommit(), kgo.FetchMaxWait(200 * time.Millisecond), kgo.AllowAutoTopicCreation(),
		kgo.OnPartitionsAssigned(c.assigned), kgo.OnPartitionsRevoked(c.revoked), kgo.OnPartitionsLost(c.lost),
		kgo.WithLogger(kzapLogger{cfg.Logger}),
	}, cfg.ClientOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	c.cl = cl
	raw, err := kgo.NewClient(append([]kgo.Opt{kgo.RequestRetries(0), kgo.WithLogger(kzapLogger{cfg.Logger})}, cfg.ClientOpts...)...)
	if err != nil {
		cl.Close()
		return err
	}
	defer raw.Close()
	c.raw = raw
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for !cl.PollFetches(ctx).IsClientClosed() && ctx.Err() == nil {
		}
	}()
	c.loop(ctx)
	lctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = cl.LeaveGroupContext(lctx)
	cl.Close()
	<-polled
	return err
}

type committer struct {
	cfg CommitterConfig
	cl  *kgo.Client
	raw *kgo.Client // sends the commits, without retries

	mu    sync.Mutex
	owned map[int32]int64 // partition -> last offset known committed; -2 until fetched

	logMu sync.Mutex
	enc   *json.Encoder
}

// unknown marks an owned partition whose committed offset is not read yet.
const unknown = -2

func (c *committer) assigned(_ context.Context, cl *kgo.Client, m map[string][]int32) {
	c.logCallback(cl, check.CallbackAssigned, m)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range m[c.cfg.Topic] {
		c.owned[p] = unknown
	}
}

func (c *committer) revoked(_ context.Context, cl *kgo.Client, m map[string][]int32) {
	c.logCallback(cl, check.CallbackRevoked, m)
	c.drop(m)
}

func (c *committer) lost(_ context.Context, cl *kgo.Client, m map[string][]int32) {
	c.logCallback(cl, check.CallbackLost, m)
	c.drop(m)
}

func (c *committer) drop(m map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range m[c.cfg.Topic] {
		delete(c.owned, p)
	}
}

// logCallback logs a line per partition of a callback's call: the
// client's own view of what it holds, which the checker replays (check 10).
// kgo calls the callbacks with an empty map too; those say nothing.
func (c *committer) logCallback(cl *kgo.Client, kind string, m map[string][]int32) {
	member, epoch := cl.GroupMetadata()
	now := time.Now()
	c.logMu.Lock()
	defer c.logMu.Unlock()
	for _, p := range m[c.cfg.Topic] {
		c.enc.Encode(check.Callback{Client: c.cfg.Name, Group: c.cfg.Group, Member: member, Epoch: epoch,
			Callback: kind, Partition: p, T: now})
	}
}

func (c *committer) loop(ctx context.Context) {
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.mu.Lock()
		needFetch := n%c.cfg.FetchEvery == 0
		next := map[int32]kgo.EpochOffset{}
		for p, off := range c.owned {
			if off == unknown {
				needFetch = true
				continue
			}
			next[p] = kgo.EpochOffset{Epoch: -1, Offset: max(off, 0) + 1}
		}
		c.mu.Unlock()
		if needFetch {
			c.fetch(ctx)
		}
		if len(next) > 0 {
			c.commit(ctx, next)
		}
	}
}

// fetch reads the committed offset of every partition, and learns those
// of the owned partitions it did not know.
func (c *committer) fetch(ctx context.Context) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = c.cfg.Group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = c.cfg.Topic
	for p := range c.cfg.Partitions {
		rt.Partitions = append(rt.Partitions, p)
	}
	req.Topics = append(req.Topics, rt)
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	t0 := time.Now()
	resp, err := req.RequestWith(rctx, c.cl)
	t1 := time.Now()
	cancel()
	if ctx.Err() != nil {
		return
	}
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		return // a failed read reads nothing
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range resp.Topics {
		if t.Topic != c.cfg.Topic {
			continue
		}
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				continue
			}
			c.log(check.OffsetOp{Kind: check.KindFetch, Partition: p.Partition, Offset: p.Offset, T0: t0, T1: t1, Outcome: check.OffsetOK})
			if off, ok := c.owned[p.Partition]; ok && off == unknown {
				c.owned[p.Partition] = p.Offset
			}
		}
	}
}

// commit commits the offsets and logs each partition's outcome. It sends
// the OffsetCommit itself, at the member's current epoch, through a
// client that never retries (raw): kgo's CommitOffsets resends a commit
// whose answer was lost (a coordinator killed after its write) and then
// reports the last attempt's code, or one it makes up for partitions it
// dropped on the way (REBALANCE_IN_PROGRESS): a refusal that says
// nothing of the earlier attempts, which may have landed. One attempt,
// one definite answer, or an error of unknown outcome.
func (c *committer) commit(ctx context.Context, offsets map[int32]kgo.EpochOffset) {
	t0 := time.Now()
	parts := make([]int32, 0, len(offsets))
	for p := range offsets {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	// Logged before it is sent: killed before the outcome is logged, the
	// commit is still known to the checker, as of unknown outcome.
	for _, p := range parts {
		c.log(check.OffsetOp{Kind: check.KindCommit, Partition: p, Offset: offsets[p].Offset, T0: t0, Outcome: check.OffsetPending})
	}
	member, epoch := c.cl.GroupMetadata()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.MemberID, req.Generation = c.cfg.Group, member, epoch
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = c.cfg.Topic
	for _, p := range parts {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = p, offsets[p].Offset, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	resp, reqErr := req.RequestWith(rctx, c.raw)
	cancel()
	t1 := time.Now()
	if reqErr != nil && ctx.Err() != nil {
		return // shutting down: its pending lines say it may have gone out
	}
	codes := map[int32]int16{}
	if reqErr == nil {
		for _, t := range resp.Topics {
			if t.Topic != c.cfg.Topic {
				continue
			}
			for _, p := range t.Partitions {
				codes[p.Partition] = p.ErrorCode
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range parts {
		op := check.OffsetOp{Member: member, Kind: check.KindCommit, Partition: p, Offset: offsets[p].Offset, T0: t0, T1: t1}
		code, answered := codes[p]
		switch {
		case reqErr != nil && notSent(reqErr):
			// Nothing went out: as good as refused.
			op.Outcome, op.Err = check.OffsetRefused, "not sent: "+reqErr.Error()
		case reqErr != nil || !answered:
			op.Outcome = check.OffsetError
			if reqErr != nil {
				op.Err = reqErr.Error()
			} else {
				op.Err = "no answer for the partition"
			}
		case code != 0:
			op.Outcome, op.Err = check.OffsetRefused, kerr.ErrorForCode(code).Error()
			if mayHaveLanded(code) {
				op.Outcome = check.OffsetError
			}
		default:
			op.Outcome = check.OffsetOK
			if _, ok := c.owned[p]; ok {
				c.owned[p] = offsets[p].Offset
			}
		}
		c.log(op)
	}
}

// mayHaveLanded reports whether a commit answered with the error code may
// have been written all the same: tenure answers COORDINATOR_NOT_AVAILABLE
// when the store write failed in a way that may have landed, and
// NOT_COORDINATOR when it lost its term while the write was in flight.
func mayHaveLanded(code int16) bool {
	switch kerr.ErrorForCode(code) {
	case kerr.CoordinatorNotAvailable, kerr.NotCoordinator, kerr.RequestTimedOut, kerr.UnknownServerError:
		return true
	}
	return false
}

// log writes one line; called with c.mu held or not, it takes its own lock.
func (c *committer) log(op check.OffsetOp) {
	op.Client, op.Group = c.cfg.Name, c.cfg.Group
	c.logMu.Lock()
	defer c.logMu.Unlock()
	c.enc.Encode(op)
}

// kzapLogger is kgo's logger on zap.
type kzapLogger struct{ l *zap.Logger }

func (k kzapLogger) Level() kgo.LogLevel {
	if k.l.Core().Enabled(zap.DebugLevel) {
		return kgo.LogLevelDebug
	}
	return kgo.LogLevelInfo
}

func (k kzapLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	fields := make([]zap.Field, 0, len(keyvals)/2)
	for i := 0; i+1 < len(keyvals); i += 2 {
		key, _ := keyvals[i].(string)
		fields = append(fields, zap.Any(key, keyvals[i+1]))
	}
	switch level {
	case kgo.LogLevelError:
		k.l.Error(msg, fields...)
	case kgo.LogLevelWarn:
		k.l.Warn(msg, fields...)
	case kgo.LogLevelInfo:
		k.l.Info(msg, fields...)
	default:
		k.l.Debug(msg, fields...)
	}
}

// notSent reports whether a request failed before it was written: the
// dial failed, or the connection was closed while the client negotiated
// its API versions on it. Anything later (a reset, EOF, a timeout) may
// have delivered it.
func notSent(err error) bool {
	if oe, ok := errors.AsType[*net.OpError](err); ok && oe.Op == "dial" {
		return true
	}
	if fe, ok := errors.AsType[*kgo.ErrFirstReadEOF](err); ok {
		msg := fe.Error()
		return strings.Contains(msg, "immediately after a dial") || strings.Contains(msg, "during api versions")
	}
	return false
}
