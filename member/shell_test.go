package member

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/epoch"
)

// answerOnce makes the cluster answer the next heartbeat of member (at a
// positive epoch) with code, instead of handling it.
func answerOnce(c *kfake.Cluster, member string, code int16) *atomic.Bool {
	var done atomic.Bool
	c.ControlKey(int16(kmsg.ConsumerGroupHeartbeat), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		req := kr.(*kmsg.ConsumerGroupHeartbeatRequest)
		if req.MemberID != member || req.MemberEpoch <= 0 {
			c.KeepControl()
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = code
		done.Store(true)
		return resp, nil, true
	})
	return &done
}

// FENCED_MEMBER_EPOCH and UNKNOWN_MEMBER_ID: every claim of the member is
// Lost at once (handlers see ErrLost), and it rejoins with the same member
// ID. kfake had not really fenced it, so the rejoin gives the partitions
// back at the same epoch: tokens that died cannot be reused, so the member
// leaves and joins again, for fresh, higher tokens.
func TestKfakeFencedAndUnknown(t *testing.T) {
	for _, code := range []*kerr.Error{kerr.FencedMemberEpoch, kerr.UnknownMemberID} {
		t.Run(code.Message, func(t *testing.T) {
			c := startKfakeCluster(t, testInterval)
			rec := &recorder{t: t}
			a := join(t, testConfig(t, c.ListenAddrs()), rec.handler("a"))
			sessions := map[string]*Session{"a": a}
			waitFor(t, 10*time.Second, stable(sessions))
			before := tokens(a)
			injected := answerOnce(c, a.MemberID(), code.Code)
			waitFor(t, 5*time.Second, func() string {
				if !injected.Load() {
					return "not injected yet"
				}
				return stable(sessions)()
			})
			waitFor(t, 5*time.Second, func() string {
				for _, cl := range a.Claims() {
					if cl.Token().Token <= before[cl.Partition()] {
						return fmt.Sprintf("%v not above its lost token %v", cl, before[cl.Partition()])
					}
				}
				return stable(sessions)()
			})
			lost := 0
			rec.mu.Lock()
			for _, rn := range rec.runs {
				if errors.Is(rn.cause, ErrLost) {
					lost++
				}
			}
			rec.mu.Unlock()
			if lost != testParts {
				t.Errorf("%d runs ended Lost, want %d", lost, testParts)
			}
			rec.check(t)
		})
	}
}

// An answer no retry can fix ends the session: FENCED_INSTANCE_ID tells a
// static member that another process took its instance ID.
func TestKfakeFatal(t *testing.T) {
	c := startKfakeCluster(t, testInterval)
	rec := &recorder{t: t}
	cfg := testConfig(t, c.ListenAddrs())
	cfg.InstanceID = "i1"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := Join(ctx, cfg, rec.handler("a"))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, stable(map[string]*Session{"a": a}))
	answerOnce(c, a.MemberID(), kerr.FencedInstanceID.Code)
	select {
	case <-a.Done():
	case <-ctx.Done():
		t.Fatal("the session did not end")
	}
	if err := a.Err(); !errors.Is(err, kerr.FencedInstanceID) {
		t.Errorf("Err: %v", err)
	}
	if err := a.Close(ctx); !errors.Is(err, kerr.FencedInstanceID) {
		t.Errorf("Close: %v", err)
	}
	if n := len(a.Claims()); n != 0 {
		t.Errorf("%d claims after the end", n)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, rn := range rec.runs {
		if !errors.Is(rn.cause, ErrLost) {
			t.Errorf("run of %d ended with %v, want ErrLost", rn.partition, rn.cause)
		}
	}
}

// Drain releases everything gracefully and keeps the member: its
// partitions go to the other member.
func TestKfakeDrain(t *testing.T) {
	brokers := startKfake(t)
	rec := &recorder{t: t, commit: true}
	a := join(t, testConfig(t, brokers), rec.handler("a"))
	b := join(t, testConfig(t, brokers), rec.handler("b"))
	waitFor(t, 10*time.Second, stable(map[string]*Session{"a": a, "b": b}))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(a.Claims()); n != 0 {
		t.Fatalf("%d claims after Drain", n)
	}
	waitFor(t, 10*time.Second, stable(map[string]*Session{"b": b}))
	rec.mu.Lock()
	for _, rn := range rec.runs {
		if rn.member == "a" && !errors.Is(rn.cause, ErrRevoked) {
			t.Errorf("a's run of %d ended with %v, want ErrRevoked", rn.partition, rn.cause)
		}
	}
	rec.mu.Unlock()
	rec.check(t)
}

// A coordinator whose heartbeat interval does not fit the member's
// session timeout (3 × 2 s > 3 s) fails the Join, which leaves again.
func TestJoinUnsafeInterval(t *testing.T) {
	c := startKfakeCluster(t, 2*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := Join(ctx, testConfig(t, c.ListenAddrs()), func(c *Claim) { <-c.Context().Done() })
	if !errors.Is(err, epoch.ErrUnsafeTiming) || s != nil {
		t.Fatalf("Join: %v, want an error wrapping ErrUnsafeTiming", err)
	}
	t.Log(err)
}

func TestJoinErrors(t *testing.T) {
	h := func(c *Claim) {}
	for _, tc := range []struct {
		name string
		cfg  Config
		h    Handler
	}{
		{"no handler", Config{Brokers: []string{"x:1"}, Group: "g", Topics: []string{"t"}}, nil},
		{"no brokers", Config{Group: "g", Topics: []string{"t"}}, h},
		{"no group", Config{Brokers: []string{"x:1"}, Topics: []string{"t"}}, h},
		{"no topics", Config{Brokers: []string{"x:1"}, Group: "g"}, h},
		{"duplicate topics", Config{Brokers: []string{"x:1"}, Group: "g", Topics: []string{"t", "t"}}, h},
		{"negative margin", Config{Brokers: []string{"x:1"}, Group: "g", Topics: []string{"t"}, SuspectMargin: -time.Second}, h},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Join(context.Background(), tc.cfg, tc.h)
			if s != nil || !(errors.Is(err, ErrConfig) || errors.Is(err, epoch.ErrUnsafeTiming)) {
				t.Fatalf("Join: %v", err)
			}
		})
	}
}

// Nothing listens: Join gives up when its context ends, and leaves nothing
// running.
func TestJoinUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	cfg := testConfig(t, []string{addr})
	_, err = Join(ctx, cfg, func(*Claim) {})
	if err == nil {
		t.Fatal("joined nothing")
	}
	t.Log(err)
}

// A static member closes (a temporary leave, epoch -2): the coordinator
// keeps its partitions for it instead of moving them, and a new process
// with the same instance ID gets them back.
func TestStaticRestart(t *testing.T) {
	for name, start := range map[string]func(*testing.T) []string{"kfake": startKfake, "tenure": startTenure} {
		t.Run(name, func(t *testing.T) {
			brokers := start(t)
			rec := &recorder{t: t, commit: true}
			static := testConfig(t, brokers)
			static.InstanceID = "i1"
			a := join(t, static, rec.handler("a"))
			b := join(t, testConfig(t, brokers), rec.handler("b"))
			waitFor(t, 10*time.Second, stable(map[string]*Session{"a": a, "b": b}))
			before := tokens(a)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := a.Close(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(3 * testInterval)
			for _, c := range b.Claims() {
				if _, ok := before[c.Partition()]; ok {
					t.Errorf("b got %v while a was away", c)
				}
			}
			a2 := join(t, static, rec.handler("a2"))
			waitFor(t, 10*time.Second, stable(map[string]*Session{"a2": a2, "b": b}))
			after := tokens(a2)
			for p, tok := range before {
				if _, ok := after[p]; !ok {
					t.Errorf("partition %d did not come back to the static member", p)
				} else if after[p] < tok {
					t.Errorf("partition %d came back at token %v, below %v", p, after[p], tok)
				}
			}
			t.Logf("tokens before %v after %v", before[firstKey(before)], after[firstKey(before)])
			rec.check(t)
		})
	}
}

func firstKey(m map[int32]epoch.Token) int32 {
	for p := range m {
		return p
	}
	return -1
}

// A claim names the member ID it was granted under, so that a worker can
// record who wrote under its token: the ID the member joined with, given
// or generated.
func TestClaimMemberID(t *testing.T) {
	for _, id := range []string{"member-under-test", ""} {
		t.Run(fmt.Sprintf("id=%q", id), func(t *testing.T) {
			cfg := testConfig(t, startKfake(t))
			cfg.MemberID = id
			rec := &recorder{t: t}
			s := join(t, cfg, rec.handler("a"))
			waitFor(t, 10*time.Second, stable(map[string]*Session{"a": s}))
			want := id
			if want == "" {
				want = s.MemberID()
			}
			claims := s.Claims()
			if len(claims) != testParts {
				t.Fatalf("%d claims, want %d", len(claims), testParts)
			}
			for _, c := range claims {
				if got := c.MemberID(); got != want || got == "" {
					t.Errorf("%v: MemberID %q, want %q", c, got, want)
				}
			}
		})
	}
}
