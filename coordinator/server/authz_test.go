package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/coordinator/acl"
	"github.com/tenure-dev/tenure/coordinator/store"
)

// actAs makes the server take c's connection for principal's, as TLS or
// SASL will once they name someone. It is a test's hand on the seam
// conn.principal: c must have had a response, so that its connection is
// registered, and must have nothing in flight. The write happens under the
// connection's lock, which its reader takes before it handles the next
// request.
func (ts *testServer) actAs(t *testing.T, c *rawClient, principal string) {
	t.Helper()
	local := c.nc.LocalAddr().String()
	found := false
	ts.eachConn(func(sc *conn) {
		if sc.addr == local {
			sc.mu.Lock()
			sc.principal = principal
			sc.mu.Unlock()
			found = true
		}
	})
	if !found {
		t.Fatalf("no server connection from %s", local)
	}
}

// dialAs dials ts and acts as principal on the connection.
func dialAs(t *testing.T, ts *testServer, principal string) *rawClient {
	t.Helper()
	c := dial(t, ts.addr)
	c.roundTrip(kmsg.NewPtrApiVersionsRequest())
	ts.actAs(t, c, principal)
	return c
}

func allowACL(rt acl.ResourceType, name, principal string, op acl.Operation) acl.Binding {
	return acl.Binding{ResourceType: rt, ResourceName: name, PatternType: kmsg.ACLResourcePatternTypeLiteral,
		Principal: principal, Host: "*", Operation: op, Permission: kmsg.ACLPermissionTypeAllow}
}

// startAuthz starts a server with authorization on, its ACL store holding
// bindings.
func startAuthz(t *testing.T, bindings []acl.Binding, superUsers ...string) *testServer {
	t.Helper()
	st := store.NewMemory()
	if err := st.CreateACLs(context.Background(), bindings); err != nil {
		t.Fatal(err)
	}
	return startServer(t, func(c *Config) {
		c.Store = st
		c.Authorization = true
		c.SuperUsers = superUsers
		c.Core.InitialRebalanceDelay = 0
	})
}

// classicMember joins group as a classic member and syncs as its
// leader with every partition of topic jobs (4), returning its member ID
// and generation.
func classicMember(t *testing.T, c *rawClient, group string) (string, int32) {
	t.Helper()
	join := probeJoin().(*kmsg.JoinGroupRequest)
	join.Group = group
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 60000, 60000
	join.Protocols[0].Metadata = (&kmsg.ConsumerMemberMetadata{Topics: []string{"jobs"}}).AppendTo(nil)
	first := c.roundTrip(join).(*kmsg.JoinGroupResponse)
	if first.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("first join: %v", kerr.ErrorForCode(first.ErrorCode))
	}
	join.MemberID = first.MemberID
	joined := c.roundTrip(join).(*kmsg.JoinGroupResponse)
	if joined.ErrorCode != 0 {
		t.Fatalf("join: %v", kerr.ErrorForCode(joined.ErrorCode))
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Version = 5
	sync.Group, sync.MemberID, sync.Generation = group, joined.MemberID, joined.Generation
	sync.ProtocolType, sync.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	a := kmsg.NewSyncGroupRequestGroupAssignment()
	a.MemberID = joined.MemberID
	plan := kmsg.ConsumerMemberAssignment{Topics: []kmsg.ConsumerMemberAssignmentTopic{{Topic: "jobs", Partitions: []int32{0, 1, 2, 3}}}}
	a.MemberAssignment = plan.AppendTo(nil)
	sync.GroupAssignment = append(sync.GroupAssignment, a)
	if resp := c.roundTrip(sync).(*kmsg.SyncGroupResponse); resp.ErrorCode != 0 {
		t.Fatalf("sync: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	return joined.MemberID, joined.Generation
}

func commitRequest(group, member string, gen int32, topic string, partition int32, offset int64) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 8
	req.Group, req.MemberID, req.Generation = group, member, gen
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = partition, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// snapshot renders, as a super user sees it, everything the attack cases
// must leave unchanged: the victim groups' descriptions and offsets, the
// topics, the groups and the ACLs.
func snapshot(t *testing.T, admin *rawClient) string {
	t.Helper()
	var b strings.Builder
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version = 5
	dg.Groups = []string{"alice-g"}
	for _, g := range admin.roundTrip(dg).(*kmsg.DescribeGroupsResponse).Groups {
		fmt.Fprintf(&b, "group %s %s %s %s err=%d\n", g.Group, g.State, g.ProtocolType, g.Protocol, g.ErrorCode)
		for _, m := range g.Members {
			fmt.Fprintf(&b, "  member %s %x\n", m.MemberID, m.MemberAssignment)
		}
	}
	cd := kmsg.NewPtrConsumerGroupDescribeRequest()
	cd.Version = 1
	cd.Groups = []string{"alice-848"}
	for _, g := range admin.roundTrip(cd).(*kmsg.ConsumerGroupDescribeResponse).Groups {
		fmt.Fprintf(&b, "consumer group %s %s epoch=%d err=%d\n", g.Group, g.State, g.Epoch, g.ErrorCode)
		for _, m := range g.Members {
			fmt.Fprintf(&b, "  member %s epoch=%d %v\n", m.MemberID, m.MemberEpoch, m.Assignment.TopicPartitions)
		}
	}
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Version = 8
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = "alice-g"
	of.Groups = append(of.Groups, rg)
	for _, g := range admin.roundTrip(of).(*kmsg.OffsetFetchResponse).Groups {
		for _, tp := range g.Topics {
			for _, p := range tp.Partitions {
				fmt.Fprintf(&b, "offset %s %s/%d=%d\n", g.Group, tp.Topic, p.Partition, p.Offset)
			}
		}
	}
	all := kmsg.NewPtrMetadataRequest()
	all.Version = 12
	for _, tp := range admin.roundTrip(all).(*kmsg.MetadataResponse).Topics {
		fmt.Fprintf(&b, "topic %s %d\n", *tp.Topic, len(tp.Partitions))
	}
	lg := kmsg.NewPtrListGroupsRequest()
	lg.Version = 5
	for _, g := range admin.roundTrip(lg).(*kmsg.ListGroupsResponse).Groups {
		fmt.Fprintf(&b, "listed %s %s\n", g.Group, g.GroupState)
	}
	da := kmsg.NewPtrDescribeACLsRequest()
	da.Version = 3
	da.ResourceType, da.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	da.Operation, da.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	for _, r := range admin.roundTrip(da).(*kmsg.DescribeACLsResponse).Resources {
		for _, a := range r.ACLs {
			fmt.Fprintf(&b, "acl %v %v %s %s %v %v\n", r.ResourceType, r.ResourcePatternType, r.ResourceName, a.Principal, a.Operation, a.PermissionType)
		}
	}
	return b.String()
}

// TestAuthorizationAttacks is the table of what a principal may not do to
// another's groups and to the cluster: each case is a request mallory
// sends, the error Kafka answers it with, and a check that nothing the
// super user sees changed.
func TestAuthorizationAttacks(t *testing.T) {
	const alice, mallory = "User:alice", "User:mallory"
	ts := startAuthz(t, []acl.Binding{
		allowACL(resGroup, "alice-g", alice, kmsg.ACLOperationAll),
		allowACL(resGroup, "alice-848", alice, kmsg.ACLOperationAll),
		allowACL(resTopic, "jobs", alice, opRead),
		// mallory may read the topic and her own group, nothing else.
		allowACL(resTopic, "jobs", mallory, opRead),
		allowACL(resGroup, "mallory-g", mallory, opRead),
	}, "User:admin")
	admin := dialAs(t, ts, "User:admin")
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.Version = 7
	for _, name := range []string{"jobs", "secret"} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 4, 1
		ct.Topics = append(ct.Topics, rt)
	}
	if code := responseCode(admin.roundTrip(ct)); code != 0 {
		t.Fatalf("admin's CreateTopics: %v", kerr.ErrorForCode(code))
	}

	a := dialAs(t, ts, alice)
	member, gen := classicMember(t, a, "alice-g")
	if code := responseCode(a.roundTrip(commitRequest("alice-g", member, gen, "jobs", 0, 42))); code != 0 {
		t.Fatalf("alice's commit: %v", kerr.ErrorForCode(code))
	}
	cg := joinHeartbeat()
	cg.Group = "alice-848"
	if resp := a.roundTrip(cg).(*kmsg.ConsumerGroupHeartbeatResponse); resp.ErrorCode != 0 {
		t.Fatalf("alice's KIP-848 join: %v", kerr.ErrorForCode(resp.ErrorCode))
	}

	initial := snapshot(t, admin)
	for _, want := range []string{"member " + member, "offset alice-g jobs/0=42", "consumer group alice-848 Stable", "topic secret 4"} {
		if !strings.Contains(initial, want) {
			t.Fatalf("the snapshot lacks %q: the attacks would be checked against nothing:\n%s", want, initial)
		}
	}

	m := dialAs(t, ts, mallory)
	groupCode := func(resp kmsg.Response) int16 { return responseCode(resp) }
	for _, tc := range []struct {
		name string
		api  int16
		req  func() kmsg.Request
		want int16
		code func(kmsg.Response) int16 // default: responseCode
	}{
		{"join someone else's group", 11, func() kmsg.Request {
			j := probeJoin().(*kmsg.JoinGroupRequest)
			j.Group, j.MemberID = "alice-g", member
			return j
		}, kerr.GroupAuthorizationFailed.Code, nil},
		{"heartbeat as someone else's member", 12, func() kmsg.Request {
			h := kmsg.NewPtrHeartbeatRequest()
			h.Version = 4
			h.Group, h.MemberID, h.Generation = "alice-g", member, gen
			return h
		}, kerr.GroupAuthorizationFailed.Code, nil},
		{"sync someone else's group", 14, func() kmsg.Request {
			s := kmsg.NewPtrSyncGroupRequest()
			s.Version = 5
			s.Group, s.MemberID, s.Generation = "alice-g", member, gen
			return s
		}, kerr.GroupAuthorizationFailed.Code, nil},
		{"leave on someone else's behalf", 13, func() kmsg.Request {
			l := kmsg.NewPtrLeaveGroupRequest()
			l.Version = 5
			l.Group = "alice-g"
			lm := kmsg.NewLeaveGroupRequestMember()
			lm.MemberID = member
			l.Members = append(l.Members, lm)
			return l
		}, kerr.GroupAuthorizationFailed.Code, nil},
		{"commit into someone else's group", 8, func() kmsg.Request {
			return commitRequest("alice-g", member, gen, "jobs", 0, 7)
		}, kerr.GroupAuthorizationFailed.Code, nil},
		{"commit into a group created for the purpose", 8, func() kmsg.Request {
			return commitRequest("alice-new", "", -1, "jobs", 0, 7)
		}, kerr.GroupAuthorizationFailed.Code, nil},
		{"heartbeat into someone else's KIP-848 group", 68, func() kmsg.Request {
			h := joinHeartbeat()
			h.Group = "alice-848"
			h.MemberID = "mallory-0000000000000000000"
			return h
		}, kerr.GroupAuthorizationFailed.Code, nil},
		{"subscribe to a topic one may not describe", 68, func() kmsg.Request {
			h := joinHeartbeat()
			h.Group = "mallory-g"
			h.SubscribedTopicNames = []string{"jobs", "secret"}
			return h
		}, kerr.TopicAuthorizationFailed.Code, nil},
		{"subscribe by a regex matching a topic one may not describe", 68, func() kmsg.Request {
			h := joinHeartbeat()
			h.Group = "mallory-g"
			h.SubscribedTopicNames = nil
			h.SubscribedTopicRegex = kmsg.StringPtr("s.*")
			return h
		}, kerr.TopicAuthorizationFailed.Code, nil},
		{"describe someone else's group", 15, func() kmsg.Request {
			d := kmsg.NewPtrDescribeGroupsRequest()
			d.Version = 5
			d.Groups = []string{"alice-g"}
			return d
		}, kerr.GroupAuthorizationFailed.Code, groupCode},
		{"describe someone else's KIP-848 group", 69, func() kmsg.Request {
			d := kmsg.NewPtrConsumerGroupDescribeRequest()
			d.Version = 1
			d.Groups = []string{"alice-848"}
			return d
		}, kerr.GroupAuthorizationFailed.Code, nil},
		{"fetch someone else's offsets", 9, func() kmsg.Request {
			f := kmsg.NewPtrOffsetFetchRequest()
			f.Version = 8
			rg := kmsg.NewOffsetFetchRequestGroup()
			rg.Group = "alice-g"
			f.Groups = append(f.Groups, rg)
			return f
		}, kerr.GroupAuthorizationFailed.Code, nil},
		{"find someone else's coordinator", 10, func() kmsg.Request {
			f := kmsg.NewPtrFindCoordinatorRequest()
			f.Version = 4
			f.CoordinatorKeys = []string{"alice-g"}
			return f
		}, kerr.GroupAuthorizationFailed.Code, nil},
		{"delete someone else's group", 42, func() kmsg.Request {
			d := kmsg.NewPtrDeleteGroupsRequest()
			d.Version = 2
			d.Groups = []string{"alice-g"}
			return d
		}, kerr.GroupAuthorizationFailed.Code, nil},
		{"delete someone else's offsets", 47, func() kmsg.Request {
			d := kmsg.NewPtrOffsetDeleteRequest()
			d.Group = "alice-g"
			rt := kmsg.NewOffsetDeleteRequestTopic()
			rt.Topic = "jobs"
			rt.Partitions = append(rt.Partitions, kmsg.NewOffsetDeleteRequestTopicPartition())
			d.Topics = append(d.Topics, rt)
			return d
		}, kerr.GroupAuthorizationFailed.Code, nil},
		{"create a topic without CREATE", 19, func() kmsg.Request {
			c := kmsg.NewPtrCreateTopicsRequest()
			c.Version = 7
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "evil", 4, 1
			c.Topics = append(c.Topics, rt)
			return c
		}, kerr.TopicAuthorizationFailed.Code, nil},
		{"auto-create a topic without CREATE", 3, func() kmsg.Request {
			return metadataRequest(12, "evil")
		}, kerr.TopicAuthorizationFailed.Code, nil},
		{"learn of a topic one may not describe", 3, func() kmsg.Request {
			return metadataRequest(12, "secret")
		}, kerr.TopicAuthorizationFailed.Code, nil},
		{"delete a topic", 20, func() kmsg.Request {
			d := kmsg.NewPtrDeleteTopicsRequest()
			d.Version = 6
			rt := kmsg.NewDeleteTopicsRequestTopic()
			rt.Topic = kmsg.StringPtr("jobs")
			d.Topics = append(d.Topics, rt)
			return d
		}, kerr.TopicAuthorizationFailed.Code, nil},
		{"fetch from a topic one may not read", 1, func() kmsg.Request {
			return fetchRequest(12, time.Second, "secret", 0)
		}, kerr.TopicAuthorizationFailed.Code, nil},
		{"list offsets of a topic one may not describe", 2, func() kmsg.Request {
			l := kmsg.NewPtrListOffsetsRequest()
			l.Version = 7
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = "secret"
			rt.Partitions = append(rt.Partitions, kmsg.NewListOffsetsRequestTopicPartition())
			l.Topics = append(l.Topics, rt)
			return l
		}, kerr.TopicAuthorizationFailed.Code, nil},
		{"grant oneself everything", 30, func() kmsg.Request {
			c := kmsg.NewPtrCreateACLsRequest()
			c.Version = 3
			cr := kmsg.NewCreateACLsRequestCreation()
			cr.ResourceType, cr.ResourceName = kmsg.ACLResourceTypeGroup, "*"
			cr.Principal, cr.Host = mallory, "*"
			cr.Operation, cr.PermissionType = kmsg.ACLOperationAll, kmsg.ACLPermissionTypeAllow
			c.Creations = append(c.Creations, cr)
			return c
		}, kerr.ClusterAuthorizationFailed.Code, nil},
		{"delete every ACL", 31, func() kmsg.Request {
			d := kmsg.NewPtrDeleteACLsRequest()
			d.Version = 3
			f := kmsg.NewDeleteACLsRequestFilter()
			f.ResourceType, f.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
			f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			d.Filters = append(d.Filters, f)
			return d
		}, kerr.ClusterAuthorizationFailed.Code, nil},
		{"read the ACLs", 29, func() kmsg.Request {
			d := kmsg.NewPtrDescribeACLsRequest()
			d.Version = 3
			d.ResourceType, d.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
			d.Operation, d.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			return d
		}, kerr.ClusterAuthorizationFailed.Code, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshot(t, admin)
			denied := ts.metric(t, "tenure_authorization_denied_total", "api", kmsg.NameForKey(tc.api))
			resp := m.roundTrip(tc.req())
			code := responseCode(resp)
			if tc.code != nil {
				code = tc.code(resp)
			}
			if code != tc.want {
				t.Fatalf("answered %v, want %v: %+v", kerr.ErrorForCode(code), kerr.ErrorForCode(tc.want), resp)
			}
			if after := snapshot(t, admin); after != before {
				t.Fatalf("state changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			if n := ts.metric(t, "tenure_authorization_denied_total", "api", kmsg.NameForKey(tc.api)); n <= denied {
				t.Fatalf("denials of %s counted %v, before %v", kmsg.NameForKey(tc.api), n, denied)
			}
		})
	}

	// What mallory sees of the lists is hers only.
	lg := kmsg.NewPtrListGroupsRequest()
	lg.Version = 5
	if groups := m.roundTrip(lg).(*kmsg.ListGroupsResponse).Groups; len(groups) != 0 {
		t.Fatalf("mallory lists %+v", groups)
	}
	all := kmsg.NewPtrMetadataRequest()
	all.Version = 12
	var names []string
	for _, tp := range m.roundTrip(all).(*kmsg.MetadataResponse).Topics {
		names = append(names, *tp.Topic)
	}
	if !slices.Equal(names, []string{"jobs"}) {
		t.Fatalf("mallory's Metadata lists %v, want [jobs]", names)
	}
	// And alice's group is still hers: her heartbeat goes through.
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version = 4
	hb.Group, hb.MemberID, hb.Generation = "alice-g", member, gen
	if code := responseCode(a.roundTrip(hb)); code != 0 {
		t.Fatalf("alice's heartbeat after the attacks: %v", kerr.ErrorForCode(code))
	}
}

// TestAuthorizationPartial: a request about several topics is refused
// for those the principal may not use and served for the others, as
// Kafka does.
func TestAuthorizationPartial(t *testing.T) {
	const bob = "User:bob"
	ts := startAuthz(t, []acl.Binding{
		allowACL(resGroup, "bob-g", bob, kmsg.ACLOperationAll),
		allowACL(resTopic, "jobs", bob, opRead),
		allowACL(resCluster, acl.ClusterName, bob, opCreate),
	}, "User:admin")
	b := dialAs(t, ts, bob)
	if resp := b.roundTrip(metadataRequest(12, "jobs")).(*kmsg.MetadataResponse); resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("bob may create topics on the cluster: %v", kerr.ErrorForCode(resp.Topics[0].ErrorCode))
	}
	admin := dialAs(t, ts, "User:admin")
	admin.roundTrip(metadataRequest(12, "secret"))

	req := commitRequest("bob-g", "", -1, "jobs", 0, 5)
	secret := kmsg.NewOffsetCommitRequestTopic()
	secret.Topic = "secret"
	for p := range int32(2) {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, 9
		secret.Partitions = append(secret.Partitions, rp)
	}
	req.Topics = append([]kmsg.OffsetCommitRequestTopic{secret}, req.Topics...)
	got := map[string]int16{}
	for _, tp := range b.roundTrip(req).(*kmsg.OffsetCommitResponse).Topics {
		for _, p := range tp.Partitions {
			got[fmt.Sprintf("%s/%d", tp.Topic, p.Partition)] = p.ErrorCode
		}
	}
	want := map[string]int16{"jobs/0": 0, "secret/0": kerr.TopicAuthorizationFailed.Code, "secret/1": kerr.TopicAuthorizationFailed.Code}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("commit answered %v, want %v", got, want)
	}

	// The offsets: of all topics, only those bob may describe; asked
	// for by name, the others are refused.
	fetch := func(topics ...string) map[string]int64 {
		f := kmsg.NewPtrOffsetFetchRequest()
		f.Version = 8
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = "bob-g"
		for _, name := range topics {
			rt := kmsg.NewOffsetFetchRequestGroupTopic()
			rt.Topic, rt.Partitions = name, []int32{0}
			rg.Topics = append(rg.Topics, rt)
		}
		f.Groups = append(f.Groups, rg)
		out := map[string]int64{}
		for _, tp := range b.roundTrip(f).(*kmsg.OffsetFetchResponse).Groups[0].Topics {
			for _, p := range tp.Partitions {
				out[fmt.Sprintf("%s/%d %d", tp.Topic, p.Partition, p.ErrorCode)] = p.Offset
			}
		}
		return out
	}
	if got := fmt.Sprint(fetch()); got != "map[jobs/0 0:5]" {
		t.Fatalf("every offset: %s", got)
	}
	if got := fmt.Sprint(fetch("jobs", "secret")); got != fmt.Sprintf("map[jobs/0 0:5 secret/0 %d:-1]", kerr.TopicAuthorizationFailed.Code) {
		t.Fatalf("named offsets: %s", got)
	}

	// Creating: the cluster's CREATE creates anything.
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.Version = 7
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "bobs", 2, 1
	ct.Topics = append(ct.Topics, rt)
	if code := responseCode(b.roundTrip(ct)); code != 0 {
		t.Fatalf("CreateTopics with CREATE on the cluster: %v", kerr.ErrorForCode(code))
	}
	// bob's authorized operations on his group are reported.
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version = 5
	dg.Groups, dg.IncludeAuthorizedOperations = []string{"bob-g"}, true
	ops := b.roundTrip(dg).(*kmsg.DescribeGroupsResponse).Groups[0].AuthorizedOperations
	if want := int32(1<<opRead | 1<<opDelete | 1<<opDescribe); ops != want {
		t.Fatalf("authorized operations %b, want %b", ops, want)
	}
}

// TestAuthorizationDeny: a DENY binding wins over the ALLOW of a wildcard,
// and a host-bound binding applies only from its host.
func TestAuthorizationDeny(t *testing.T) {
	ts := startAuthz(t, []acl.Binding{
		{ResourceType: resGroup, ResourceName: "*", PatternType: kmsg.ACLResourcePatternTypeLiteral, Principal: "User:*", Host: "*",
			Operation: kmsg.ACLOperationAll, Permission: kmsg.ACLPermissionTypeAllow},
		{ResourceType: resGroup, ResourceName: "locked-", PatternType: kmsg.ACLResourcePatternTypePrefixed, Principal: "User:*", Host: "127.0.0.1",
			Operation: kmsg.ACLOperationRead, Permission: kmsg.ACLPermissionTypeDeny},
		{ResourceType: resGroup, ResourceName: "far", PatternType: kmsg.ACLResourcePatternTypeLiteral, Principal: "User:*", Host: "10.1.2.3",
			Operation: kmsg.ACLOperationRead, Permission: kmsg.ACLPermissionTypeDeny},
	})
	c := dial(t, ts.addr) // anonymous, from 127.0.0.1
	for group, want := range map[string]int16{"open": 0, "locked-1": kerr.GroupAuthorizationFailed.Code, "far": 0} {
		j := probeJoin().(*kmsg.JoinGroupRequest)
		j.Group = group
		if code := responseCode(c.roundTrip(j)); code != want && !(want == 0 && code == kerr.MemberIDRequired.Code) {
			t.Errorf("join %s: %v, want %v", group, kerr.ErrorForCode(code), kerr.ErrorForCode(want))
		}
	}
}

// TestACLAdminKadm: kadm manages ACLs as it would on Kafka: create,
// describe, delete, with Kafka's errors for what may not be done.
func TestACLAdminKadm(t *testing.T) {
	ts := startAuthz(t, nil, AnonymousPrincipal)
	adm := kadm.NewClient(newKgo(t, ts))
	ctx := context.Background()

	b := kadm.NewACLs().Allow("User:alice").AllowHosts("*").Groups("orders").Topics("jobs").
		Operations(kadm.OpRead, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral)
	created, err := adm.CreateACLs(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(created) != 4 {
		t.Fatalf("%d creations, want 4", len(created))
	}
	for _, c := range created {
		if c.Err != nil {
			t.Fatalf("creation %+v: %v", c, c.Err)
		}
	}
	// Idempotent, as in Kafka.
	if again, err := adm.CreateACLs(ctx, b); err != nil || again[0].Err != nil {
		t.Fatalf("creating again: %v %+v", err, again)
	}
	pre := kadm.NewACLs().Deny("User:mallory").DenyHosts("*").Groups("ord").Operations(kadm.OpAll).ResourcePatternType(kadm.ACLPatternPrefixed)
	if _, err := adm.CreateACLs(ctx, pre); err != nil {
		t.Fatal(err)
	}

	described, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().Deny().AllowHosts().DenyHosts().
		Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range described {
		if r.Err != nil {
			t.Fatalf("describe: %v", r.Err)
		}
		for _, d := range r.Described {
			got = append(got, fmt.Sprintf("%v %v %s %s %s %v %v", d.Type, d.Pattern, d.Name, d.Principal, d.Host, d.Operation, d.Permission))
		}
	}
	slices.Sort(got)
	got = slices.Compact(got)
	want := []string{
		"GROUP LITERAL orders User:alice * DESCRIBE ALLOW",
		"GROUP LITERAL orders User:alice * READ ALLOW",
		"GROUP PREFIXED ord User:mallory * ALL DENY",
		"TOPIC LITERAL jobs User:alice * DESCRIBE ALLOW",
		"TOPIC LITERAL jobs User:alice * READ ALLOW",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("described:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// MATCH finds what applies to a resource: the literal and the prefix.
	match := kmsg.NewPtrDescribeACLsRequest()
	match.ResourceType, match.ResourceName, match.ResourcePatternType = kmsg.ACLResourceTypeGroup, kmsg.StringPtr("orders"), kmsg.ACLResourcePatternTypeMatch
	match.Operation, match.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	mresp, err := match.RequestWith(ctx, newKgo(t, ts))
	if err != nil || mresp.ErrorCode != 0 || len(mresp.Resources) != 2 {
		t.Fatalf("MATCH orders: %v %+v", err, mresp)
	}

	deleted, err := adm.DeleteACLs(ctx, kadm.NewACLs().Allow("User:alice").AllowHosts("*").Topics("jobs").
		Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range deleted {
		if r.Err != nil {
			t.Fatalf("delete: %v", r.Err)
		}
		n += len(r.Deleted)
	}
	if n != 2 {
		t.Fatalf("deleted %d bindings, want 2", n)
	}
	if left, _ := ts.authz.store.LoadACLs(ctx); len(left) != 3 {
		t.Fatalf("%d bindings left, want 3: %v", len(left), left)
	}

	// An invalid creation is INVALID_REQUEST; a valid one beside it goes
	// through.
	bad := kmsg.NewPtrCreateACLsRequest()
	for _, name := range []string{"not-the-cluster", acl.ClusterName} {
		cr := kmsg.NewCreateACLsRequestCreation()
		cr.ResourceType, cr.ResourceName, cr.Principal, cr.Host = kmsg.ACLResourceTypeCluster, name, "User:ops", "*"
		cr.Operation, cr.PermissionType = kmsg.ACLOperationDescribe, kmsg.ACLPermissionTypeAllow
		bad.Creations = append(bad.Creations, cr)
	}
	bresp, err := bad.RequestWith(ctx, newKgo(t, ts))
	if err != nil || len(bresp.Results) != 2 || bresp.Results[0].ErrorCode != kerr.InvalidRequest.Code || bresp.Results[1].ErrorCode != 0 {
		t.Fatalf("invalid and valid creation: %v %+v", err, bresp)
	}
}

// TestACLAPIsWithoutAuthorizer: without an authorizer the ACL APIs are
// SECURITY_DISABLED, as on Kafka, and every other request is allowed.
func TestACLAPIsWithoutAuthorizer(t *testing.T) {
	ts := startServer(t, nil)
	adm := kadm.NewClient(newKgo(t, ts))
	res, err := adm.CreateACLs(context.Background(), kadm.NewACLs().Allow("User:a").AllowHosts("*").Groups("g").Operations(kadm.OpRead))
	if err != nil || len(res) != 1 || res[0].Err != kerr.SecurityDisabled {
		t.Fatalf("CreateACLs without an authorizer: %v %+v", err, res)
	}
	c := dial(t, ts.addr)
	if code := responseCode(c.roundTrip(metadataRequest(12, "jobs"))); code != 0 {
		t.Fatalf("Metadata without an authorizer: %v", kerr.ErrorForCode(code))
	}
}

// TestACLChangeApplies: an ACL created through the protocol applies to the
// next request, and its deletion too.
func TestACLChangeApplies(t *testing.T) {
	ts := startAuthz(t, nil, "User:admin")
	admin := dialAs(t, ts, "User:admin")
	c := dialAs(t, ts, "User:carol")
	join := func() int16 {
		j := probeJoin().(*kmsg.JoinGroupRequest)
		j.Group = "carol-g"
		return responseCode(c.roundTrip(j))
	}
	if code := join(); code != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("before any ACL: %v", kerr.ErrorForCode(code))
	}
	cr := kmsg.NewPtrCreateACLsRequest()
	cr.Version = 3
	c0 := kmsg.NewCreateACLsRequestCreation()
	c0.ResourceType, c0.ResourceName, c0.Principal, c0.Host = resGroup, "carol-g", "User:carol", "*"
	c0.Operation, c0.PermissionType = opRead, kmsg.ACLPermissionTypeAllow
	cr.Creations = append(cr.Creations, c0)
	if code := responseCode(admin.roundTrip(cr)); code != 0 {
		t.Fatalf("CreateACLs: %v", kerr.ErrorForCode(code))
	}
	if code := join(); code != kerr.MemberIDRequired.Code {
		t.Fatalf("after the ACL: %v", kerr.ErrorForCode(code))
	}
	dr := kmsg.NewPtrDeleteACLsRequest()
	dr.Version = 3
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType, f.Principal = resGroup, kmsg.ACLResourcePatternTypeAny, kmsg.StringPtr("User:carol")
	f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	dr.Filters = append(dr.Filters, f)
	resp := admin.roundTrip(dr).(*kmsg.DeleteACLsResponse)
	if resp.Results[0].ErrorCode != 0 || len(resp.Results[0].MatchingACLs) != 1 {
		t.Fatalf("DeleteACLs: %+v", resp)
	}
	if code := join(); code != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("after the deletion: %v", kerr.ErrorForCode(code))
	}
}

// TestListenerPrincipal: a PLAINTEXT listener with a principal makes its
// clients act as that principal, so a super user's loopback listener adds
// the first user and ACLs of a cluster whose other listener's anonymous
// clients are refused; nothing else changes for the other listener.
func TestListenerPrincipal(t *testing.T) {
	st := store.NewMemory()
	ts := startServer(t, func(c *Config) {
		c.Store = st
		c.Authorization = true
		c.SuperUsers = []string{"User:admin"}
		c.Listeners = []Listener{{Name: "PLAINTEXT", Protocol: Plaintext}, {Name: "ADMIN", Protocol: Plaintext, Principal: "User:admin"}}
	})
	ctx := context.Background()
	kgoAt := func(addr string) *kadm.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return kadm.NewClient(cl)
	}
	anon, admin := kgoAt(ts.addrs["PLAINTEXT"]), kgoAt(ts.addrs["ADMIN"])
	// kadm salts an UpsertSCRAM in place: each request gets its own.
	ups := func() []kadm.UpsertSCRAM {
		return []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "pw"}}
	}
	if res, err := anon.AlterUserSCRAMs(ctx, nil, ups()); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("adding a user anonymously: %v %+v, want CLUSTER_AUTHORIZATION_FAILED", err, res)
	}
	res, err := admin.AlterUserSCRAMs(ctx, nil, ups())
	if err != nil || res["alice"].Err != nil {
		t.Fatalf("adding a user through the admin listener: %v %+v", err, res)
	}
	acls := kadm.NewACLs().Allow("User:alice").AllowHosts("*").Groups("g").Operations(kadm.OpRead)
	if c, err := anon.CreateACLs(ctx, acls); err != nil || c[0].Err != kerr.ClusterAuthorizationFailed {
		t.Fatalf("creating an ACL anonymously: %v %+v, want CLUSTER_AUTHORIZATION_FAILED", err, c)
	}
	if c, err := admin.CreateACLs(ctx, acls); err != nil || c[0].Err != nil {
		t.Fatalf("creating an ACL through the admin listener: %v %+v", err, c)
	}
	if got, _ := st.LoadACLs(ctx); len(got) != 1 || got[0].Principal != "User:alice" {
		t.Fatalf("stored ACLs %v, want alice's one", got)
	}
}
