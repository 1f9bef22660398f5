package server

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// benchProtocol is the group protocol a benchmark's members speak.
type benchProtocol uint8

const (
	_             benchProtocol = iota
	benchClassic                // JoinGroup/SyncGroup, then Heartbeat
	benchConsumer               // KIP-848 ConsumerGroupHeartbeat
)

func (p benchProtocol) String() string {
	switch p {
	case benchClassic:
		return "classic"
	case benchConsumer:
		return "consumer"
	}
	return "benchProtocol(?)"
}

// benchMember is one simulated member, set up with raw requests.
type benchMember struct {
	id  string
	gen int32 // classic generation or KIP-848 member epoch
	// owned are the partitions a KIP-848 member was last assigned.
	owned []kmsg.ConsumerGroupHeartbeatRequestTopic
}

const (
	benchGroup = "bench"
	benchTopic = "jobs"
	// benchSession is every member's session timeout: long enough that
	// no member expires while the other servers take their turns under
	// load (-tenure.window up to about a minute). kfake's largest
	// classic session timeout is 5 minutes.
	benchSession = 4 * time.Minute
	// benchRebalance is every member's rebalance timeout.
	benchRebalance = time.Minute
)

// newBenchClients returns n kgo clients of addr, closed when b ends.
func newBenchClients(b *testing.B, addr string, n int, opts ...kgo.Opt) []*kgo.Client {
	b.Helper()
	clients := make([]*kgo.Client, n)
	for i := range clients {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestTimeoutOverhead(30 * time.Second)}, opts...)...)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(cl.Close)
		clients[i] = cl
	}
	return clients
}

// createBenchTopic creates the 64-partition topic, which may exist.
func createBenchTopic(b *testing.B, cl *kgo.Client) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	created, err := kadm.NewClient(cl).CreateTopics(ctx, 64, 1, nil, benchTopic)
	if err == nil {
		err = created[benchTopic].Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		b.Fatalf("CreateTopics: %v", err)
	}
}

// setupMembers joins n members to the bench group on the server at
// addr and waits until every one of them heartbeats successfully at one
// generation (classic) or holds a settled assignment (KIP-848).
func setupMembers(b *testing.B, addr string, proto benchProtocol, n int) []benchMember {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var members []benchMember
	var err error
	switch proto {
	case benchClassic:
		members, err = setupClassic(ctx, addr, n)
	case benchConsumer:
		clients := newBenchClients(b, addr, 4)
		members, err = setupConsumer(ctx, clients, benchGroup, benchTopic, n)
		for _, cl := range clients {
			cl.Close()
		}
	}
	if err != nil {
		b.Fatalf("setting up %d %s members: %v", n, proto, err)
	}
	return members
}

// setupClassic runs every member's JoinGroup/SyncGroup dance in its own
// goroutine, on its own connection as a real consumer would (kfake reads
// no further request of a connection while one is parked, and tenure
// reads at most MaxInFlight): join (rejoining with the member ID
// MEMBER_ID_REQUIRED hands out), sync (the leader with a round-robin
// plan), then heartbeat every 200 ms, rejoining whenever the group
// rebalances. It returns once every member's last heartbeat succeeded at
// the same generation, three checks in a row.
func setupClassic(ctx context.Context, addr string, n int) ([]benchMember, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu      sync.Mutex
		members = make([]benchMember, n)
		okGen   = make([]int32, n) // generation of the last good heartbeat, 0 while (re)joining
		fatal   error
	)
	fail := func(err error) {
		mu.Lock()
		fatal = errors.Join(fatal, err)
		mu.Unlock()
		cancel()
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := dialBench(addr)
			if err != nil {
				fail(err)
				return
			}
			defer c.close()
			stop := context.AfterFunc(ctx, c.close) // unblocks a parked join
			defer stop()
			var id string
			var gen int32
			joined := false
			for ctx.Err() == nil {
				if !joined {
					id, gen, joined, err = classicJoinSync(c, id)
					if err != nil {
						if ctx.Err() == nil {
							fail(err)
						}
						return
					}
					continue
				}
				req := kmsg.NewPtrHeartbeatRequest()
				req.Version = 4
				req.Group, req.Generation, req.MemberID = benchGroup, gen, id
				resp, err := c.roundTrip(req)
				if err != nil {
					if ctx.Err() == nil {
						fail(err)
					}
					return
				}
				mu.Lock()
				switch code := resp.(*kmsg.HeartbeatResponse).ErrorCode; code {
				case 0:
					okGen[i] = gen
					members[i] = benchMember{id: id, gen: gen}
				case kerr.UnknownMemberID.Code:
					okGen[i], id, joined = 0, "", false
				default: // REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION
					okGen[i], joined = 0, false
				}
				mu.Unlock()
				if joined {
					select {
					case <-ctx.Done():
					case <-time.After(200 * time.Millisecond):
					}
				}
			}
		}()
	}
	settled := 0
	for settled < 3 && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
		mu.Lock()
		g := okGen[0]
		same := g > 0
		for _, x := range okGen {
			same = same && x == g
		}
		mu.Unlock()
		if same {
			settled++
		} else {
			settled = 0
		}
	}
	err := ctx.Err()
	cancel()
	wg.Wait()
	if fatal != nil {
		return nil, fatal
	}
	if settled < 3 {
		return nil, err
	}
	return members, nil
}

// classicJoinSync joins (or rejoins, with id) and syncs once. joined is
// false if the group rebalanced again before the sync completed.
func classicJoinSync(c *benchConn, id string) (string, int32, bool, error) {
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version = 9
	join.Group = benchGroup
	join.SessionTimeoutMillis = int32(benchSession / time.Millisecond)
	join.RebalanceTimeoutMillis = int32(benchRebalance / time.Millisecond)
	join.ProtocolType = "consumer"
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{benchTopic}
	proto := kmsg.NewJoinGroupRequestProtocol()
	proto.Name = "range"
	proto.Metadata = meta.AppendTo(nil)
	join.Protocols = append(join.Protocols, proto)
	for {
		join.MemberID = id
		r, err := c.roundTrip(join)
		if err != nil {
			return id, 0, false, err
		}
		jr := r.(*kmsg.JoinGroupResponse)
		switch jr.ErrorCode {
		case 0:
		case kerr.MemberIDRequired.Code:
			id = jr.MemberID
			continue
		case kerr.UnknownMemberID.Code:
			id = ""
			continue
		case kerr.RebalanceInProgress.Code:
			continue
		default:
			return id, 0, false, kerr.ErrorForCode(jr.ErrorCode)
		}
		id = jr.MemberID
		sync := kmsg.NewPtrSyncGroupRequest()
		sync.Version = 5
		sync.Group, sync.Generation, sync.MemberID = benchGroup, jr.Generation, id
		sync.ProtocolType, sync.Protocol = kmsg.StringPtr("consumer"), jr.Protocol
		if jr.LeaderID == id {
			sync.GroupAssignment = roundRobinPlan(jr.Members)
		}
		r, err = c.roundTrip(sync)
		if err != nil {
			return id, 0, false, err
		}
		switch code := r.(*kmsg.SyncGroupResponse).ErrorCode; code {
		case 0:
			return id, jr.Generation, true, nil
		case kerr.UnknownMemberID.Code:
			return "", 0, false, nil
		case kerr.RebalanceInProgress.Code, kerr.IllegalGeneration.Code:
			return id, 0, false, nil
		default:
			return id, 0, false, kerr.ErrorForCode(code)
		}
	}
}

// benchConn is a raw Kafka connection: one request at a time, at the
// version set on the request.
type benchConn struct {
	nc   net.Conn
	br   *bufio.Reader
	corr int32
	buf  []byte
}

func dialBench(addr string) (*benchConn, error) {
	nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	return &benchConn{nc: nc, br: bufio.NewReader(nc)}, nil
}

func (c *benchConn) close() { c.nc.Close() }

// roundTrip sends req and reads its response. A parked request may wait
// up to a minute and a half (the members' rebalance timeout and more).
func (c *benchConn) roundTrip(req kmsg.Request) (kmsg.Response, error) {
	resps, err := c.pipeline([]kmsg.Request{req})
	if err != nil {
		return nil, err
	}
	return resps[0], nil
}

// pipeline sends every request in one write, then reads their responses
// in order.
func (c *benchConn) pipeline(reqs []kmsg.Request) ([]kmsg.Response, error) {
	id := "bench"
	c.buf = c.buf[:0]
	first := c.corr + 1
	for _, req := range reqs {
		c.corr++
		c.buf = appendRequest(c.buf, c.corr, &id, req)
	}
	c.nc.SetDeadline(time.Now().Add(90 * time.Second))
	if _, err := c.nc.Write(c.buf); err != nil {
		return nil, err
	}
	resps := make([]kmsg.Response, len(reqs))
	for k, req := range reqs {
		var size [4]byte
		if _, err := io.ReadFull(c.br, size[:]); err != nil {
			return nil, err
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(c.br, body); err != nil {
			return nil, err
		}
		if len(body) < 4 || int32(binary.BigEndian.Uint32(body)) != first+int32(k) {
			return nil, errors.New("bench: response out of order")
		}
		resp := req.ResponseKind()
		body = body[4:]
		if resp.IsFlexible() && resp.Key() != 18 {
			if len(body) == 0 {
				return nil, errors.New("bench: short response")
			}
			body = body[1:] // empty response header tags
		}
		if err := resp.ReadFrom(body); err != nil {
			return nil, err
		}
		resps[k] = resp
	}
	return resps, nil
}

// roundRobinPlan is a leader's plan: partition p to the p-th member (mod
// the member count), members sorted by ID.
func roundRobinPlan(members []kmsg.JoinGroupResponseMember) []kmsg.SyncGroupRequestGroupAssignment {
	ids := make([]string, len(members))
	for i, m := range members {
		ids[i] = m.MemberID
	}
	slices.Sort(ids)
	parts := make([][]int32, len(ids))
	for p := range int32(64) {
		parts[int(p)%len(ids)] = append(parts[int(p)%len(ids)], p)
	}
	plan := make([]kmsg.SyncGroupRequestGroupAssignment, len(ids))
	for i, id := range ids {
		a := kmsg.NewConsumerMemberAssignment()
		if len(parts[i]) > 0 {
			t := kmsg.NewConsumerMemberAssignmentTopic()
			t.Topic, t.Partitions = benchTopic, parts[i]
			a.Topics = append(a.Topics, t)
		}
		plan[i] = kmsg.NewSyncGroupRequestGroupAssignment()
		plan[i].MemberID, plan[i].MemberAssignment = id, a.AppendTo(nil)
	}
	return plan
}

// newMemberID returns a member ID as a KIP-848 client makes one: a random
// UUID in URL-safe base64.
func newMemberID() string {
	var u [16]byte
	rand.Read(u[:])
	return base64.RawURLEncoding.EncodeToString(u[:])
}

// consumerState is a KIP-848 member during setup.
type consumerState struct {
	id    string
	epoch int32
	owned []kmsg.ConsumerGroupHeartbeatRequestTopic
}

// setupConsumer joins n KIP-848 members of group, subscribed to topic
// (epoch 0), and then heartbeats
// all of them in rounds, each member acknowledging the assignment it was
// last given at once, until a round changes no assignment and every
// member is at the same epoch.
func setupConsumer(ctx context.Context, clients []*kgo.Client, group, topic string, n int) ([]benchMember, error) {
	states := make([]consumerState, n)
	for i := range states {
		states[i].id = newMemberID()
	}
	for round := 0; ; round++ {
		if round == 200 {
			return nil, errors.New("assignments still changing after 200 heartbeat rounds")
		}
		var changed atomic.Int32
		err := forEachParallel(ctx, n, 256, func(i int) error {
			s := &states[i]
			cl := clients[i%len(clients)]
			req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			req.Group, req.MemberID, req.MemberEpoch = group, s.id, s.epoch
			req.Topics = s.owned
			if s.epoch == 0 {
				req.RebalanceTimeoutMillis = int32(benchRebalance / time.Millisecond)
				req.SubscribedTopicNames = []string{topic}
				req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			}
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return err
			}
			switch resp.ErrorCode {
			case 0:
			case kerr.FencedMemberEpoch.Code:
				s.epoch, s.owned = 0, nil
				changed.Add(1)
				return nil
			case kerr.UnknownMemberID.Code:
				s.id, s.epoch, s.owned = newMemberID(), 0, nil
				changed.Add(1)
				return nil
			default:
				return kerr.ErrorForCode(resp.ErrorCode)
			}
			if resp.MemberEpoch != s.epoch {
				s.epoch = resp.MemberEpoch
				changed.Add(1)
			}
			if resp.Assignment != nil {
				owned := make([]kmsg.ConsumerGroupHeartbeatRequestTopic, 0, len(resp.Assignment.Topics))
				for _, t := range resp.Assignment.Topics {
					rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
					rt.TopicID, rt.Partitions = t.TopicID, t.Partitions
					owned = append(owned, rt)
				}
				if !sameOwned(owned, s.owned) {
					changed.Add(1)
				}
				s.owned = owned
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		same := true
		for _, s := range states {
			same = same && s.epoch == states[0].epoch && s.epoch > 0
		}
		if changed.Load() == 0 && same {
			break
		}
	}
	members := make([]benchMember, n)
	for i, s := range states {
		members[i] = benchMember{id: s.id, gen: s.epoch, owned: s.owned}
	}
	return members, nil
}

func sameOwned(a, b []kmsg.ConsumerGroupHeartbeatRequestTopic) bool {
	count := func(ts []kmsg.ConsumerGroupHeartbeatRequestTopic) (n int) {
		for _, t := range ts {
			n += len(t.Partitions)
		}
		return n
	}
	if count(a) != count(b) {
		return false
	}
	have := make(map[[16]byte]map[int32]bool)
	for _, t := range b {
		if have[t.TopicID] == nil {
			have[t.TopicID] = make(map[int32]bool)
		}
		for _, p := range t.Partitions {
			have[t.TopicID][p] = true
		}
	}
	for _, t := range a {
		for _, p := range t.Partitions {
			if !have[t.TopicID][p] {
				return false
			}
		}
	}
	return true
}

// forEachParallel calls fn(i) for i in [0, n), at most width at a time,
// and returns the first error.
func forEachParallel(ctx context.Context, n, width int, fn func(i int) error) error {
	var (
		next    atomic.Int64
		errOnce sync.Once
		first   error
		wg      sync.WaitGroup
	)
	for range min(width, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					errOnce.Do(func() { first = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}
