package server

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tenure-dev/tenure/coordinator/store"
	"github.com/tenure-dev/tenure/epoch"
	"github.com/tenure-dev/tenure/epoch/grantwire"
)

// signingServer starts a server that signs grants, with one topic "jobs"
// of 4 partitions, on st (a new memory store if nil).
func signingServer(t *testing.T, st *store.Memory, mutate func(*Config)) *testServer {
	t.Helper()
	if st == nil {
		st = store.NewMemory()
	}
	ts := startServer(t, func(c *Config) {
		c.Store = st
		c.SignGrants = true
		c.Topics = []TopicSpec{{Name: "jobs", Partitions: 4}}
		c.Core.InitialRebalanceDelay = 0
		if mutate != nil {
			mutate(c)
		}
	})
	eventually(t, 5*time.Second, "the server's signing keys loaded", func() bool { return ts.signing.cur.Load() != nil })
	return ts
}

// jobsID returns the ID of the topic "jobs".
func jobsID(t *testing.T, c *rawClient) [16]byte {
	t.Helper()
	resp := c.roundTrip(metadataRequest(12, "jobs")).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("metadata of jobs: %+v", resp.Topics)
	}
	return resp.Topics[0].TopicID
}

// verifier returns a verifier of the server's published keys for group's
// partitions of topic, requiring signatures.
func (ts *testServer) verifier(t *testing.T, group string, topic [16]byte) *epoch.Verifier {
	t.Helper()
	ks, err := ts.SigningKeys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return epoch.NewVerifier(epoch.VerifierConfig{Group: group, TopicID: topic, Keys: ks, RequireSigned: true})
}

// grantsOf returns the grants a response carries, failing t on a
// malformed field.
func grantsOf(t *testing.T, resp kmsg.Response) (grantwire.Grants, bool) {
	t.Helper()
	gs, ok, err := grantwire.From(grantwire.TagsOf(resp))
	if err != nil {
		t.Fatal(err)
	}
	return gs, ok
}

// beat848 sends a KIP-848 heartbeat for member: a join at epoch 0, else
// reporting owned (nil: a keepalive that reports nothing).
func beat848(c *rawClient, member string, memberEpoch int32, owned []int32, topic [16]byte) *kmsg.ConsumerGroupHeartbeatResponse {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group = "g"
	req.MemberID = member
	req.MemberEpoch = memberEpoch
	if memberEpoch == 0 {
		req.RebalanceTimeoutMillis = 30000
		req.SubscribedTopicNames = []string{"jobs"}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	} else if owned != nil {
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: topic, Partitions: owned}}
	}
	return c.roundTrip(req).(*kmsg.ConsumerGroupHeartbeatResponse)
}

// TestSignedGrants848: a KIP-848 member's join answer carries a signed
// grant of every partition it is given, at the member epoch it takes as
// token, which a fence's verifier of the published keys accepts; the
// steady state carries none; after a rotation the next answer grants
// everything under the new key, and both keys verify until the old one is
// revoked.
func TestSignedGrants848(t *testing.T) {
	ts := signingServer(t, nil, nil)
	c := dial(t, ts.addr)
	topic := jobsID(t, c)

	resp := beat848(c, "m1", 0, nil, topic)
	if resp.ErrorCode != 0 || resp.Assignment == nil {
		t.Fatalf("join: %+v", resp)
	}
	gs, ok := grantsOf(t, resp)
	if !ok || len(gs.Grants) != 4 {
		t.Fatalf("the join's grants: %+v, %v; want 4", gs, ok)
	}
	v := ts.verifier(t, "g", topic)
	first := gs.Key
	for _, g := range gs.Grants {
		st := gs.Signed(g, "m1")
		if g.TopicID != topic || g.Token != epoch.Token(resp.MemberEpoch) {
			t.Fatalf("grant %+v, want topic %v at token %d", g, topic, resp.MemberEpoch)
		}
		if err := v.Verify(epoch.Partition(g.Partition), st); err != nil {
			t.Fatalf("verifying the grant of %d: %v", g.Partition, err)
		}
		// The grant is the member's and the partition's only.
		if err := v.Verify(epoch.Partition(g.Partition)+1, st); !errors.Is(err, epoch.ErrBadSignature) {
			t.Fatalf("the grant of %d for another partition: %v", g.Partition, err)
		}
		st.Member = "m2"
		if err := v.Verify(epoch.Partition(g.Partition), st); !errors.Is(err, epoch.ErrBadSignature) {
			t.Fatalf("the grant of %d for another member: %v", g.Partition, err)
		}
	}
	owned := []int32{0, 1, 2, 3}
	resp = beat848(c, "m1", resp.MemberEpoch, owned, topic)
	if _, ok := grantsOf(t, resp); ok || resp.ErrorCode != 0 {
		t.Fatalf("a heartbeat that changes nothing: %+v, grants %v", resp, ok)
	}

	rotated, err := ts.RotateKey(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	active, _ := rotated.Active()
	if active.ID == first {
		t.Fatal("RotateKey kept the active key")
	}
	if old, _ := rotated.Lookup(first); old.State != epoch.KeyRetired {
		t.Fatalf("the old key after a rotation: %v", old.State)
	}
	resp = beat848(c, "m1", resp.MemberEpoch, nil, topic)
	gs, ok = grantsOf(t, resp)
	if !ok || gs.Key != active.ID || len(gs.Grants) != 4 {
		t.Fatalf("the first answer after a rotation: %+v, %v; want 4 grants by %s", gs, ok, active.ID)
	}
	v.SetKeys(rotated)
	for _, g := range gs.Grants {
		if err := v.Verify(epoch.Partition(g.Partition), gs.Signed(g, "m1")); err != nil {
			t.Fatalf("the re-granted %d: %v", g.Partition, err)
		}
	}
	if _, ok := grantsOf(t, beat848(c, "m1", resp.MemberEpoch, nil, topic)); ok {
		t.Fatal("the second answer after a rotation grants again")
	}
	revoked, err := ts.RevokeKey(context.Background(), first)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.RevokeKey(context.Background(), active.ID); !errors.Is(err, store.ErrActiveKey) {
		t.Fatalf("revoking the active key: %v", err)
	}
	if old, _ := revoked.Lookup(first); old.State != epoch.KeyRevoked {
		t.Fatalf("the old key after its revocation: %v", old.State)
	}
	// Revoking it again changes nothing: no write of the ring (which every
	// node's watch would follow), the revocation keeps its time.
	before, err := ts.signing.store.LoadKeys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	again, err := ts.RevokeKey(context.Background(), first)
	if err != nil {
		t.Fatalf("revoking a revoked key: %v", err)
	}
	after, err := ts.signing.store.LoadKeys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if after.Version != before.Version {
		t.Errorf("revoking a revoked key wrote the ring: version %d -> %d", before.Version, after.Version)
	}
	was, _ := revoked.Lookup(first)
	if a, _ := again.Lookup(first); a.State != epoch.KeyRevoked || !a.Revoked.Equal(was.Revoked) {
		t.Errorf("the key after a second revocation: %+v", a)
	}
	if n := ts.metric(t, "tenure_grants_signed_total"); n != 8 {
		t.Errorf("tenure_grants_signed_total = %v, want 8", n)
	}
}

// TestSignedGrantsClassic: a classic SyncGroup answer of a flexible
// version (v4+) grants the member what it owns, at the generation; v3 has
// no tags and carries none.
func TestSignedGrantsClassic(t *testing.T) {
	ts := signingServer(t, nil, nil)
	c := dial(t, ts.addr)
	topic := jobsID(t, c)
	join := func(member string) *kmsg.JoinGroupResponse {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version = 9
		req.Group, req.MemberID, req.ProtocolType = "cg", member, "consumer"
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 10000
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name = "range"
		req.Protocols = append(req.Protocols, p)
		return c.roundTrip(req).(*kmsg.JoinGroupResponse)
	}
	j := join("")
	j = join(j.MemberID)
	if j.ErrorCode != 0 {
		t.Fatalf("join: %+v", j)
	}
	var a kmsg.ConsumerMemberAssignment
	at := kmsg.NewConsumerMemberAssignmentTopic()
	at.Topic, at.Partitions = "jobs", []int32{1, 3}
	a.Topics = append(a.Topics, at)
	sync := func(version int16) *kmsg.SyncGroupResponse {
		req := kmsg.NewPtrSyncGroupRequest()
		req.Version = version
		req.Group, req.MemberID, req.Generation = "cg", j.MemberID, j.Generation
		if version >= 5 {
			req.ProtocolType, req.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
		}
		sa := kmsg.NewSyncGroupRequestGroupAssignment()
		sa.MemberID, sa.MemberAssignment = j.MemberID, a.AppendTo(nil)
		req.GroupAssignment = append(req.GroupAssignment, sa)
		return c.roundTrip(req).(*kmsg.SyncGroupResponse)
	}
	resp := sync(5)
	gs, ok := grantsOf(t, resp)
	if resp.ErrorCode != 0 || !ok || len(gs.Grants) != 2 {
		t.Fatalf("SyncGroup v5: %+v, grants %+v %v", resp, gs, ok)
	}
	v := ts.verifier(t, "cg", topic)
	for _, g := range gs.Grants {
		if g.Token != epoch.Token(j.Generation) {
			t.Fatalf("grant %+v, want token %d", g, j.Generation)
		}
		if err := v.Verify(epoch.Partition(g.Partition), gs.Signed(g, j.MemberID)); err != nil {
			t.Fatalf("the grant of %d: %v", g.Partition, err)
		}
	}
	if resp := sync(3); resp.ErrorCode != 0 {
		t.Fatalf("SyncGroup v3: %+v", resp)
	} else if resp.UnknownTags.Len() != 0 {
		t.Fatal("SyncGroup v3 carries tags")
	}
}

// TestSigningKeysSurviveRestart: the keys are the store's. A server on a
// store signs with the key a previous server on it made; a rotation made
// through one node reaches another that shares the store at its next key
// refresh, which then grants its members everything again under the new
// key; and a retired key is revoked once its retention has passed.
func TestSigningKeysSurviveRestart(t *testing.T) {
	st := store.NewMemory()
	a := signingServer(t, st, nil)
	ka, err := a.SigningKeys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	activeA, _ := ka.Active()
	a.stop()

	b := signingServer(t, st, func(c *Config) {
		c.KeyRefresh = 50 * time.Millisecond
		c.KeyRetention = time.Second
	})
	kb, err := b.SigningKeys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if activeB, _ := kb.Active(); activeB.ID != activeA.ID || len(kb.Keys()) != 1 {
		t.Fatalf("after a restart the ring is %v, want the one key %s", kb.Keys(), activeA.ID)
	}
	c := dial(t, b.addr)
	topic := jobsID(t, c)
	resp := beat848(c, "m1", 0, nil, topic)
	resp = beat848(c, "m1", resp.MemberEpoch, []int32{0, 1, 2, 3}, topic)

	// Another node of the set rotates, through the store.
	other := &Server{cfg: Config{StoreTimeout: time.Second}, signing: &signing{on: true, store: st}, log: b.log}
	other.signing.signed, other.signing.rotated = b.signing.signed, b.signing.rotated
	rotated, err := other.RotateKey(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	next, _ := rotated.Active()
	// The node swaps its ring and then asks each group to grant again: a
	// heartbeat between the two is answered with no grants, as any
	// keepalive that changed nothing. The first grants after the swap
	// must be all four, by the new key.
	var gs grantwire.Grants
	eventually(t, 5*time.Second, "the member granted again after another node's rotation", func() bool {
		if r := b.signing.cur.Load(); r == nil || r.signer.ID() != next.ID {
			return false
		}
		var ok bool
		gs, ok = grantsOf(t, beat848(c, "m1", resp.MemberEpoch, nil, topic))
		return ok
	})
	if gs.Key != next.ID || len(gs.Grants) != 4 {
		t.Fatalf("after another node's rotation: %+v, want 4 grants by %s", gs, next.ID)
	}
	eventually(t, 5*time.Second, "the retired key revoked after its retention", func() bool {
		ks, err := b.SigningKeys(context.Background())
		if err != nil {
			return false
		}
		k, _ := ks.Lookup(activeA.ID)
		return k.State == epoch.KeyRevoked
	})
}

// TestSigningOff: a server that does not sign adds no tag, makes no key,
// and refuses the key operations.
func TestSigningOff(t *testing.T) {
	st := store.NewMemory()
	ts := startServer(t, func(c *Config) {
		c.Store = st
		c.Topics = []TopicSpec{{Name: "jobs", Partitions: 4}}
	})
	c := dial(t, ts.addr)
	resp := beat848(c, "m1", 0, nil, jobsID(t, c))
	if resp.ErrorCode != 0 || resp.UnknownTags.Len() != 0 {
		t.Fatalf("join without signing: %+v, %d tags", resp, resp.UnknownTags.Len())
	}
	if ring, _ := st.LoadKeys(context.Background()); len(ring.Keys) != 0 {
		t.Fatalf("a server that does not sign made keys: %+v", ring)
	}
	if _, err := ts.SigningKeys(context.Background()); !errors.Is(err, ErrSigningOff) {
		t.Fatalf("SigningKeys: %v", err)
	}
	if _, err := ts.RotateKey(context.Background()); !errors.Is(err, ErrSigningOff) {
		t.Fatalf("RotateKey: %v", err)
	}
}

// TestInteropGroupSigning runs the stock kgo group scenario
// (testInteropGroup: joins, commits, a leave, a kill, a late commit),
// classic and KIP-848, against tenure signing every grant: the tagged
// field the responses carry changes nothing for a stock client, which
// judges the group by its own callbacks.
func TestInteropGroupSigning(t *testing.T) {
	for _, mode := range []interopMode{interopClassic, interop848} {
		t.Run(mode.String(), func(t *testing.T) {
			ts := startServerLogger(t, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)), func(c *Config) {
				c.Core.MinSessionTimeout = 500 * time.Millisecond
				c.Core.InitialRebalanceDelay = 0
				c.Core.ConsumerSessionTimeout = interopSession
				c.Core.ConsumerHeartbeatInterval = interopHeartbeat
				c.SignGrants = true
			})
			testInteropGroup(t, &interopBackend{name: "tenure", addr: ts.addr, tenure: ts}, mode)
			if n := ts.metric(t, "tenure_grants_signed_total"); n < interopPartitions {
				t.Fatalf("%v grants signed, want at least %d: the stock clients were not sent any", n, interopPartitions)
			}
		})
	}
}

// TestSigningFailoverMidRotation: a rotation made through the leader of an
// HA set, which then loses its term before its members heartbeat again,
// is finished by the next leader: it signs with the new key (the ring is
// the shared store's) and grants the members everything they hold again
// under it, as a group loaded while a retired key still verifies does.
func TestSigningFailoverMidRotation(t *testing.T) {
	set := &fakeSet{leader: -1, shared: store.NewMemory(), nodes: []Node{{ID: 0}, {ID: 1}}}
	na, nb := set.node(0), set.node(1)
	start := func(n *fakeNode) *testServer {
		return startServer(t, func(c *Config) {
			c.Store, c.TopicStore, c.KeyStore, c.Cluster = nil, set.shared, set.shared, n
			c.TopicRefresh, c.KeyRefresh = 50*time.Millisecond, 50*time.Millisecond
			c.SignGrants = true
		})
	}
	a, b := start(na), start(nb)
	set.advertise(a, b)
	ta := newFakeTerm(set.shared)
	set.setLeader(0)
	na.terms <- ta
	eventually(t, 5*time.Second, "a to lead", func() bool { return a.lead.Load() != nil && a.signing.cur.Load() != nil })

	ca := dial(t, a.addr)
	topic := jobsID(t, ca)
	const m1 = "member-a-000000000000000"
	r := beat848(ca, m1, 0, nil, topic)
	gs, ok := grantsOf(t, r)
	if r.ErrorCode != 0 || !ok || len(gs.Grants) != 64 {
		t.Fatalf("join on a: %+v, %d grants", r, len(gs.Grants))
	}
	first := gs.Key
	owned := make([]int32, 64)
	for i := range owned {
		owned[i] = int32(i)
	}
	r = beat848(ca, m1, r.MemberEpoch, owned, topic)

	rotated, err := a.RotateKey(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	next, _ := rotated.Active()
	ta.end()
	set.setLeader(1)
	nb.terms <- newFakeTerm(set.shared)
	eventually(t, 5*time.Second, "b to lead and sign with the new key", func() bool {
		cur := b.signing.cur.Load()
		return b.lead.Load() != nil && cur != nil && cur.signer.ID() == next.ID
	})
	cb := dial(t, b.addr)
	r = beat848(cb, m1, r.MemberEpoch, nil, topic)
	gs, ok = grantsOf(t, r)
	if r.ErrorCode != 0 || !ok || gs.Key != next.ID || len(gs.Grants) != 64 {
		t.Fatalf("the member's first heartbeat on b: %+v, grants %d by %s, want 64 by %s (the old key was %s)", r, len(gs.Grants), gs.Key, next.ID, first)
	}
	v := b.verifier(t, "g", topic)
	for _, g := range gs.Grants {
		if err := v.Verify(epoch.Partition(g.Partition), gs.Signed(g, m1)); err != nil {
			t.Fatalf("grant of %d after the fail-over: %v", g.Partition, err)
		}
	}
}

// TestSigningPublishDelay: with a KeyPublishDelay, a rotation first
// publishes the next key as pending: grants go on under the active key,
// and a resource that fetched the keys right after the rotation (and
// never again) verifies every token the new key signs once the delay has
// passed and the node has promoted it, so no honest write is refused. A
// rotation while one is pending is refused; RotateKeyNow activates the
// pending key at once.
func TestSigningPublishDelay(t *testing.T) {
	ts := signingServer(t, nil, func(c *Config) {
		c.KeyPublishDelay = 300 * time.Millisecond
		c.KeyRefresh = 50 * time.Millisecond
	})
	c := dial(t, ts.addr)
	topic := jobsID(t, c)
	resp := beat848(c, "m1", 0, nil, topic)
	gs, _ := grantsOf(t, resp)
	first := gs.Key
	resp = beat848(c, "m1", resp.MemberEpoch, []int32{0, 1, 2, 3}, topic)

	staged, err := ts.RotateKey(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := staged.Active(); a.ID != first {
		t.Fatalf("right after a rotation with a publish delay the active key is %s, want %s still", a.ID, first)
	}
	var next epoch.KeyID
	for _, k := range staged.Keys() {
		if k.State == epoch.KeyPending {
			next = k.ID
		}
	}
	if next == "" {
		t.Fatalf("the rotation published no pending key: %+v", staged.Keys())
	}
	if _, err := ts.RotateKey(context.Background()); !errors.Is(err, store.ErrRotationPending) {
		t.Fatalf("a rotation while one is pending: %v, want ErrRotationPending", err)
	}
	// The resource fetches the keys now, once.
	v := epoch.NewVerifier(epoch.VerifierConfig{Group: "g", TopicID: topic, Keys: staged, RequireSigned: true})
	if gs, ok := grantsOf(t, beat848(c, "m1", resp.MemberEpoch, nil, topic)); ok {
		t.Fatalf("a pending key made the node grant again: %+v", gs)
	}

	eventually(t, 10*time.Second, "the node to sign with the pending key after its delay", func() bool {
		r := ts.signing.cur.Load()
		return r != nil && r.signer.ID() == next
	})
	// The node takes the new key, then asks its groups to grant again
	// (useKeys): a heartbeat in between is answered without grants, and
	// the next one after the groups' re-grant carries them.
	eventually(t, 10*time.Second, "a heartbeat with the grants under the new key", func() bool {
		gs, _ = grantsOf(t, beat848(c, "m1", resp.MemberEpoch, nil, topic))
		return len(gs.Grants) > 0
	})
	if gs.Key != next || len(gs.Grants) != 4 {
		t.Fatalf("after the promotion: %+v, want 4 grants by %s", gs, next)
	}
	for _, g := range gs.Grants {
		if err := v.Verify(epoch.Partition(g.Partition), gs.Signed(g, "m1")); err != nil {
			t.Fatalf("a resource holding the keys of the rotation's moment refuses the new key's grant of %d: %v", g.Partition, err)
		}
	}
	ks, err := ts.SigningKeys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if old, _ := ks.Lookup(first); old.State != epoch.KeyRetired {
		t.Fatalf("the old key after the promotion: %v", old.State)
	}

	// An emergency rotation: staged, then activated at once.
	staged, err = ts.RotateKey(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var third epoch.KeyID
	for _, k := range staged.Keys() {
		if k.State == epoch.KeyPending {
			third = k.ID
		}
	}
	now, err := ts.RotateKeyNow(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := now.Active(); a.ID != third || third == "" {
		t.Fatalf("RotateKeyNow made %s active, want the pending %s", a.ID, third)
	}
	if r := ts.signing.cur.Load(); r.signer.ID() != third {
		t.Fatalf("after RotateKeyNow the node signs with %s, want %s", r.signer.ID(), third)
	}
}

// racingKeys is a key store on which another node changes the ring
// (race) right before this node's next write, which then loses the
// compare-and-swap.
type racingKeys struct {
	store.KeyStore
	mu   sync.Mutex
	race func(store.KeyStore)
}

func (r *racingKeys) StoreKeys(ctx context.Context, keys []store.SigningKey, version int64) error {
	r.mu.Lock()
	race := r.race
	r.race = nil
	r.mu.Unlock()
	if race != nil {
		race(r.KeyStore)
	}
	return r.KeyStore.StoreKeys(ctx, keys, version)
}

// TestSigningLogsOnlyWhatItStored: a node whose promotion of the pending
// key loses the compare-and-swap to another node's (which promoted it
// first) signs with the promoted key, and does not log a promotion it
// did not make.
func TestSigningLogsOnlyWhatItStored(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	keys := &racingKeys{KeyStore: store.NewMemory()}
	ts := startServerLogger(t, zap.New(core), func(c *Config) {
		c.Store, c.KeyStore, c.SignGrants = store.NewMemory(), keys, true
		c.KeyPublishDelay, c.KeyRefresh = 200*time.Millisecond, 50*time.Millisecond
	})
	eventually(t, 5*time.Second, "the server's signing keys loaded", func() bool { return ts.signing.cur.Load() != nil })
	staged, err := ts.RotateKey(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var next epoch.KeyID
	for _, k := range staged.Keys() {
		if k.State == epoch.KeyPending {
			next = k.ID
		}
	}
	// The other node promotes the pending key just before this node's
	// write of the same promotion, due once the delay has passed.
	keys.mu.Lock()
	keys.race = func(ks store.KeyStore) {
		if _, err := store.UpdateKeys(context.Background(), ks, func(ring []store.SigningKey) ([]store.SigningKey, bool, error) {
			out, changed := store.ActivatePending(ring, time.Now())
			return out, changed, nil
		}); err != nil {
			t.Errorf("the other node's promotion: %v", err)
		}
	}
	keys.mu.Unlock()
	eventually(t, 10*time.Second, "the node to sign with the promoted key", func() bool {
		r := ts.signing.cur.Load()
		return r != nil && r.signer.ID() == next
	})
	keys.mu.Lock()
	raced := keys.race == nil
	keys.mu.Unlock()
	if !raced {
		t.Fatal("the node promoted the key without writing the ring: the race never ran")
	}
	if n := logs.FilterMessage("signing key activated after its publish delay").Len(); n != 0 {
		t.Errorf("the node logged %d promotions, want 0: the other node made it", n)
	}
	if n := logs.FilterMessage("signing key published; it signs after the publish delay").Len(); n != 1 {
		t.Errorf("the node logged %d publications of the rotation it made, want 1", n)
	}
}

// TestRotateBeforeKeysLoad: a staged rotation that reaches a node before
// it loaded its key ring (the admin API answers while Serve starts),
// on a new ring, gives the ring its first active key in the same write:
// the active key signs, the new key waits as pending, and the node then
// serves with the active key.
func TestRotateBeforeKeysLoad(t *testing.T) {
	st := store.NewMemory()
	cfg := DefaultConfig()
	cfg.Store, cfg.SignGrants, cfg.KeyPublishDelay = st, true, time.Hour
	cfg.Logger = zaptest.NewLogger(t)
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	staged, err := s.RotateKey(context.Background())
	if err != nil {
		t.Fatalf("a staged rotation before the keys were loaded: %v", err)
	}
	active, ok := staged.Active()
	var pending epoch.KeyID
	for _, k := range staged.Keys() {
		if k.State == epoch.KeyPending {
			pending = k.ID
		}
	}
	if !ok || pending == "" || len(staged.Keys()) != 2 {
		t.Fatalf("after a staged rotation of a new ring: %+v, want an active and a pending key", staged.Keys())
	}
	ring, err := st.LoadKeys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := store.Active(ring.Keys); !ok || a.ID() != active.ID || len(ring.Keys) != 2 {
		t.Fatalf("the stored ring: %+v, want %s active and %s pending", ring.Keys, active.ID, pending)
	}

	ts := signingServer(t, st, func(c *Config) { c.KeyPublishDelay = time.Hour })
	if r := ts.signing.cur.Load(); r.signer.ID() != active.ID {
		t.Fatalf("the node signs with %s, want the active %s", r.signer.ID(), active.ID)
	}
}
