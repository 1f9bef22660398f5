package server

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// TestSASLWithACLs puts authentication and authorization together, with
// stock kgo and kadm clients that authenticate with SCRAM-SHA-512: the
// super user admin creates users and ACLs; alice, allowed READ on group
// jobs-g and topic jobs, joins and commits; mallory, who authenticates
// just as well, may not join, commit into or describe alice's group, nor
// create ACLs or users (CLUSTER_AUTHORIZATION_FAILED), and nothing of
// alice's changes.
func TestSASLWithACLs(t *testing.T) {
	ts, _, _ := saslServer(t, func(c *Config) {
		c.Authorization = true
		c.SuperUsers = []string{"User:admin"}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	as := func(user, pass string, opts ...kgo.Opt) *kgo.Client {
		return newKgo(t, ts, append([]kgo.Opt{kgo.SeedBrokers(ts.addrs["SASL"]),
			kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism())}, opts...)...)
	}
	// Users are bootstrapped through the plaintext listener, whose
	// anonymous principal may not do it once ACLs are on: bootstrap the
	// super user there is refused too...
	anon := kadm.NewClient(newKgo(t, ts))
	if res, err := anon.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "admin", Mechanism: kadm.ScramSha512, Password: "pw"}}); err == nil && res.Error() == nil {
		t.Fatal("an anonymous client created a user with the authorizer on")
	}
	// ...so the operator adds the first one to the store, as `tenure
	// users add` does.
	addUser(t, ts.creds.cs, "admin", "admin-pw", ScramSHA512)
	admin := kadm.NewClient(as("admin", "admin-pw"))
	res, err := admin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha512, Password: "alice-pw"},
		{User: "mallory", Mechanism: kadm.ScramSha512, Password: "mallory-pw"},
	})
	if err != nil || res.Error() != nil {
		t.Fatalf("the super user's AlterUserSCRAMs: %v %v", err, res.Error())
	}
	if _, err := admin.CreateTopic(ctx, 4, 1, nil, "jobs"); err != nil {
		t.Fatal(err)
	}
	b := kadm.NewACLs().Allow("User:alice").Groups("jobs-g").Topics("jobs").Operations(kadm.OpRead, kadm.OpDescribe).
		ResourcePatternType(kadm.ACLPatternLiteral)
	if created, err := admin.CreateACLs(ctx, b); err != nil || created[0].Err != nil {
		t.Fatalf("CreateACLs: %v %+v", err, created)
	}

	// alice joins and commits.
	assigned := make(chan struct{})
	var once sync.Once
	alice := as("alice", "alice-pw", kgo.ConsumerGroup("jobs-g"), kgo.ConsumeTopics("jobs"), kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { once.Do(func() { close(assigned) }) }))
	kgoGroupRoundTripAs(t, alice, assigned)

	mallory := as("mallory", "mallory-pw")
	madm := kadm.NewClient(mallory)
	offsetsBefore, err := admin.FetchOffsets(ctx, "jobs-g")
	if err != nil {
		t.Fatal(err)
	}
	// Joining alice's group.
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = "jobs-g", "consumer", 10000, 10000
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: (&kmsg.ConsumerMemberMetadata{Topics: []string{"jobs"}}).AppendTo(nil)}}
	// (kgo first looks the coordinator up, which needs DESCRIBE on the
	// group: it fails there, as against Kafka.)
	groupDenied := func(what string, code int16, err error) {
		t.Helper()
		if !errors.Is(err, kerr.GroupAuthorizationFailed) && (err != nil || code != kerr.GroupAuthorizationFailed.Code) {
			t.Errorf("mallory's %s: %v, code %d; want GROUP_AUTHORIZATION_FAILED", what, err, code)
		}
	}
	jresp, err := join.RequestWith(ctx, mallory)
	code := int16(0)
	if err == nil {
		code = jresp.ErrorCode
	}
	groupDenied("JoinGroup", code, err)
	// Committing into it.
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation, commit.MemberID = "jobs-g", -1, ""
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = "jobs"
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset = 0, 999
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	cresp, err := commit.RequestWith(ctx, mallory)
	code = 0
	if err == nil {
		code = cresp.Topics[0].Partitions[0].ErrorCode
	}
	groupDenied("OffsetCommit", code, err)
	// Describing it.
	if d, err := madm.DescribeGroups(ctx, "jobs-g"); err == nil && !errors.Is(d["jobs-g"].Err, kerr.GroupAuthorizationFailed) {
		t.Errorf("mallory's describe: %+v", d["jobs-g"])
	}
	// Granting itself rights, and making users.
	if created, err := madm.CreateACLs(ctx, kadm.NewACLs().Allow("User:mallory").Groups("jobs-g").Operations(kadm.OpAll).
		ResourcePatternType(kadm.ACLPatternLiteral)); err == nil && (len(created) == 0 || !errors.Is(created[0].Err, kerr.ClusterAuthorizationFailed)) {
		t.Errorf("mallory's CreateACLs: %+v", created)
	}
	if r, err := madm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "mallory2", Mechanism: kadm.ScramSha512, Password: "x"}}); err == nil && !errors.Is(r.Error(), kerr.ClusterAuthorizationFailed) {
		t.Errorf("mallory's AlterUserSCRAMs: %v", r.Error())
	}
	if _, err := madm.DescribeUserSCRAMs(ctx); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Errorf("mallory's DescribeUserSCRAMs: %v", err)
	}

	// Nothing of alice's changed, and mallory made no user.
	offsetsAfter, err := admin.FetchOffsets(ctx, "jobs-g")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := offsetsAfter.Lookup("jobs", 0); o.At == 999 || len(offsetsAfter) != len(offsetsBefore) {
		t.Errorf("alice's offsets changed: %+v, were %+v", offsetsAfter, offsetsBefore)
	}
	users, err := admin.DescribeUserSCRAMs(ctx)
	if err != nil || len(users) != 3 {
		t.Errorf("users after the attacks: %v %v", err, users)
	}
}

// kgoGroupRoundTripAs polls cl until assigned is closed (its group gave it
// partitions), then commits offset 1 of partition 0.
func kgoGroupRoundTripAs(t *testing.T, cl *kgo.Client, assigned <-chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	polled := make(chan struct{})
	pollCtx, stop := context.WithCancel(ctx)
	go func() {
		defer close(polled)
		for pollCtx.Err() == nil && !cl.PollFetches(pollCtx).IsClientClosed() {
		}
	}()
	defer func() { stop(); <-polled }()
	select {
	case <-assigned:
	case <-ctx.Done():
		t.Fatal("alice was given no partitions")
	}
	if err := commitOne(ctx, cl, "jobs", 0, 1); err != nil {
		t.Fatalf("alice's commit: %v", err)
	}
}
