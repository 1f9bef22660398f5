package member

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/epoch"
)

// Handler does the work of one claim. The library calls it in a goroutine
// of its own for every [Claim], as soon as the claim may be worked on.
//
// The contract:
//   - Work only while c.Context() is alive, and pass it to everything that
//     blocks. Attach c.Token() to writes to fenced resources.
//   - When the context is cancelled, return promptly. If the cause is
//     [ErrRevoked], commit what was done first ([Claim.Commit] still works);
//     the partition is handed to its next owner only after the handler
//     returns. If it is [ErrSuspect] or [ErrLost], do not commit (it would
//     be refused anyway): the token may already belong to someone else.
//   - A handler that blocks past the rebalance timeout after its claim was
//     revoked gets the member evicted by the coordinator: every claim of
//     the member goes Lost (their contexts are cancelled with [ErrLost])
//     and the member rejoins with new, higher tokens. Its late writes are
//     rejected by the fences.
//   - A handler that returns while its context is still alive leaves the
//     partition claimed but idle until the coordinator moves it.
//
// A panic in a handler is not recovered.
type Handler func(c *Claim)

// Session is a member of a group: it heartbeats, claims partitions and runs
// the [Handler] on them, until [Session.Close]. Create it with [Join]. Its
// methods are safe for concurrent use.
type Session struct {
	cfg     Config
	log     *zap.Logger
	cl      *kgo.Client
	ownsCl  bool
	handler Handler
	baseCtx context.Context // values for claim contexts, never cancelled

	// Owned by the loop goroutine.
	m          *Machine
	parts      map[pkey]*partWork
	timer      *time.Timer
	resolving  bool
	interval   time.Duration
	draining   []chan struct{}
	isDraining bool
	// signed are the coordinator's signed grants, the last few per
	// partition (grants.go).
	signed map[key][]epoch.SignedToken

	// Inputs to the loop.
	hbDone  chan heartbeatResult
	runDone chan *Claim
	idsDone chan map[string][16]byte
	rejects chan CommitRejected
	cmds    chan func(now time.Time)

	loopCtx    context.Context // cancelled when the loop ends
	loopCancel context.CancelFunc
	loopDone   chan struct{}
	bg         sync.WaitGroup // heartbeat, lookup and metadata goroutines
	coord      coordinator    // the group's coordinator (coordinator.go)
	handlers   sync.WaitGroup // handler goroutines

	memberID    atomic.Pointer[string]
	memberEpoch atomic.Int32

	mu       sync.Mutex
	snapshot []*Claim
	joined   chan struct{} // closed after the first acknowledged heartbeat
	// joinWarned is when a failure of the join was last logged: a member
	// that cannot join says so, and why, every joinWarnEvery.
	joinWarned time.Time
	joinOnce   sync.Once
	done       chan struct{} // closed when the member left or failed
	err        error
	stopOnce   sync.Once
}

// partWork is the loop's view of one partition's work.
type partWork struct {
	topic     string
	topicID   [16]byte
	partition int32
	token     epoch.Token // the machine's latest token for the partition
	state     epoch.State // the machine's latest state for it
	run       *Claim      // the handler running, if any
	latest    *Claim      // the last Claim created, for Claims()
	want      bool        // work should run under token
}

type heartbeatResult struct {
	req   *kmsg.ConsumerGroupHeartbeatRequest
	resp  *kmsg.ConsumerGroupHeartbeatResponse
	err   error
	coord int32 // the broker it went to, -1 if none was found
}

// Join joins cfg.Group and returns once the coordinator acknowledged the
// member's first heartbeat; from then on the handler runs for every
// partition the member claims, until [Session.Close]. If ctx ends first,
// or the coordinator refuses the member, Join returns the error and
// nothing keeps running.
//
// Join waits for every topic of cfg.Topics to exist (its Metadata request
// asks for their creation, which tenure grants), logging every 10 s which
// do not and why; a name that is not a valid topic name fails it at once.
//
// Join checks the configuration, then, with the heartbeat interval the
// coordinator returns, the timing rules of [epoch.Timing]: a combination
// that would make healthy members go Suspect fails the Join with an error
// wrapping [epoch.ErrUnsafeTiming] (after leaving the group again).
func Join(ctx context.Context, cfg Config, handler Handler) (*Session, error) {
	if handler == nil {
		return nil, fmt.Errorf("%w: no handler", ErrConfig)
	}
	cfg = cfg.defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Session{
		cfg:      cfg,
		log:      cfg.Logger.With(zap.String("group", cfg.Group), zap.String("member", cfg.MemberID)),
		handler:  handler,
		baseCtx:  context.WithoutCancel(ctx),
		parts:    make(map[pkey]*partWork),
		hbDone:   make(chan heartbeatResult, 1),
		runDone:  make(chan *Claim),
		idsDone:  make(chan map[string][16]byte, 1),
		rejects:  make(chan CommitRejected),
		cmds:     make(chan func(time.Time)),
		loopDone: make(chan struct{}),
		joined:   make(chan struct{}),
		done:     make(chan struct{}),
		coord:    coordinator{id: -1},
	}
	s.cl = cfg.Client
	if s.cl == nil {
		cl, err := kgo.NewClient(cfg.clientOpts()...)
		if err != nil {
			return nil, fmt.Errorf("member: %w", err)
		}
		s.cl, s.ownsCl = cl, true
	}
	id := cfg.MemberID
	s.memberID.Store(&id)

	ids, err := joinTopicIDs(ctx, s.cl, cfg.Topics, s.log.With(zap.Strings("brokers", cfg.Brokers)))
	if err != nil {
		s.closeClient()
		return nil, err
	}
	mcfg := cfg.machineConfig()
	mcfg.TopicIDs = ids
	s.m = NewMachine(mcfg)
	s.loopCtx, s.loopCancel = context.WithCancel(context.Background())
	go s.run()

	select {
	case <-s.joined:
	case <-s.done:
		err := s.Err()
		s.wait(context.Background())
		return nil, err
	case <-ctx.Done():
		s.abort(context.Cause(ctx))
		s.wait(context.Background())
		return nil, fmt.Errorf("member: join: %w", context.Cause(ctx))
	}
	if iv := s.heartbeatInterval(); iv > 0 {
		if err := mcfg.ValidateInterval(iv); err != nil {
			cctx, cancel := context.WithTimeout(context.Background(), cfg.SessionTimeout)
			defer cancel()
			_ = s.Close(cctx)
			return nil, fmt.Errorf("member: the coordinator's heartbeat interval %v does not fit this config: %w", iv, err)
		}
	}
	return s, nil
}

// joinWarnEvery spaces the warnings of a member that cannot join.
const joinWarnEvery = 10 * time.Second

// joinTopicIDs reads the subscribed topics' IDs, retrying while the
// cluster is unreachable or a topic does not exist (yet), until ctx ends.
// A topic whose name is not a valid one fails the join at once: it never
// will exist.
func joinTopicIDs(ctx context.Context, cl *kgo.Client, topics []string, log *zap.Logger) (map[string][16]byte, error) {
	start := time.Now()
	var warned time.Time
	for backoff := minBackoff; ; backoff = min(2*backoff, 2*time.Second) {
		ids, missing, err := topicIDs(ctx, cl, topics)
		if err == nil && len(missing) == 0 {
			return ids, nil
		}
		now := time.Now()
		if err == nil {
			names := slices.Sorted(maps.Keys(missing))
			for _, n := range names {
				if errors.Is(missing[n], kerr.InvalidTopicException) {
					return nil, fmt.Errorf("member: join: %q is not a valid topic name (%w)", n, missing[n])
				}
			}
			err = missingTopicsError(names, missing)
			if now.Sub(warned) >= joinWarnEvery && ctx.Err() == nil {
				warned = now
				log.Warn("joining: a subscribed topic does not exist; waiting for it to be created",
					zap.Strings("missing", names), zap.Duration("waited", now.Sub(start).Round(time.Millisecond)), zap.Error(err))
			}
		} else if now.Sub(warned) >= joinWarnEvery && ctx.Err() == nil {
			warned = now
			log.Warn("joining: the brokers do not answer Metadata for the topics; retrying",
				zap.Strings("topics", topics), zap.Duration("waited", now.Sub(start).Round(time.Millisecond)), zap.Error(err))
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("member: join: topic metadata: %w (%w)", err, context.Cause(ctx))
		}
	}
}

// missingTopicsError says which topics do not exist, and why.
func missingTopicsError(names []string, missing map[string]error) error {
	var parts []string
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("topic %q does not exist (%v)", n, missing[n]))
	}
	return errors.New(strings.Join(parts, "; "))
}

// MemberID returns the member's ID.
func (s *Session) MemberID() string {
	id, _ := s.member()
	return id
}

// Claims returns the member's current claims (Pending, Owned, Revoking or
// Suspect), sorted by topic and partition.
func (s *Session) Claims() []*Claim {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Claim, 0, len(s.snapshot))
	for _, c := range s.snapshot {
		if c.State().Held() {
			out = append(out, c)
		}
	}
	return out
}

// Done is closed when the session has ended: after Close, or when the
// coordinator refused the member for good (see [Session.Err]). Call Close
// even then: it releases the client.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err returns why the session ended, once Done is closed: nil after a
// clean Close, else the coordinator's refusal (FENCED_INSTANCE_ID when
// another process took this static member's instance ID, ...).
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Drain releases every partition gracefully and keeps the member in the
// group, owning nothing: it subscribes to no topic, the coordinator
// revokes everything, each handler sees [ErrRevoked], commits and
// returns. Drain returns when no claim is left, or with ctx's error.
// Close afterwards leaves at once.
func (s *Session) Drain(ctx context.Context) error {
	ch := make(chan struct{})
	if !s.do(ctx, func(now time.Time) {
		s.isDraining = true
		if err := s.m.Subscribe(now, nil); err != nil {
			panic("member: empty subscription refused: " + err.Error())
		}
		s.draining = append(s.draining, ch)
	}) {
		return s.closedErr(ctx)
	}
	select {
	case <-ch:
		return nil
	case <-s.done:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close ends the session gracefully: every claim is revoked (handlers see
// [ErrRevoked], commit and return), then the member leaves the group, so
// the coordinator hands its partitions over at once. A static member
// (InstanceID) leaves temporarily: the coordinator keeps its partitions
// for it for a session timeout, for a quick restart.
//
// If ctx ends first, Close stops everything at once: remaining claims are
// Lost, the coordinator expires the member after its session timeout, and
// Close returns ctx's error without waiting for handlers that ignore their
// context. Close closes the client Join created. Calling Close again
// waits for the first call's end.
func (s *Session) Close(ctx context.Context) error {
	s.do(ctx, func(now time.Time) {
		s.m.Leave(now, s.cfg.InstanceID != "")
	})
	aborted := false
	select {
	case <-s.done:
	case <-ctx.Done():
		aborted = true
		s.abort(fmt.Errorf("%w (closed before the leave completed)", ErrLost))
	}
	werr := s.wait(ctx)
	if aborted {
		return fmt.Errorf("member: close: %w", context.Cause(ctx))
	}
	if werr != nil {
		return werr
	}
	return s.Err()
}

// do runs f on the loop goroutine; false if the loop has ended.
func (s *Session) do(ctx context.Context, f func(now time.Time)) bool {
	select {
	case s.cmds <- f:
		return true
	case <-s.loopDone:
		return false
	case <-ctx.Done():
		return false
	}
}

func (s *Session) closedErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return ErrClosed
}

// wait waits for the loop and the background goroutines, then for the
// handlers (bounded by ctx), and closes the client Join created.
func (s *Session) wait(ctx context.Context) error {
	<-s.loopDone
	// A handler still committing would start a lookup (bg.Add) at any
	// time; the loop's own goroutines start none after it ended.
	s.closeLookups()
	s.bg.Wait()
	handlersDone := make(chan struct{})
	go func() { s.handlers.Wait(); close(handlersDone) }()
	var err error
	select {
	case <-handlersDone:
	case <-ctx.Done():
		err = fmt.Errorf("member: close: handlers still running: %w", ctx.Err())
	}
	s.closeClient()
	return err
}

func (s *Session) closeClient() {
	if s.ownsCl {
		s.stopOnce.Do(s.cl.Close)
	}
}

// abort ends the loop at once, with every claim Lost.
func (s *Session) abort(cause error) {
	if !s.do(context.Background(), func(time.Time) { s.finish(cause, true) }) {
		return
	}
}

// member returns the member ID and epoch to put in commits.
func (s *Session) member() (string, int32) {
	return *s.memberID.Load(), s.memberEpoch.Load()
}

func (s *Session) heartbeatInterval() time.Duration {
	ch := make(chan time.Duration, 1)
	if !s.do(context.Background(), func(time.Time) { ch <- s.m.HeartbeatInterval() }) {
		return 0
	}
	return <-ch
}

// rejected tells the loop a commit was rejected as stale.
func (s *Session) rejected(e CommitRejected) {
	select {
	case s.rejects <- e:
	case <-s.loopDone:
	}
}
