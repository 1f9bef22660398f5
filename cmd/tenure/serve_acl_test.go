package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/coordinator/acl"
	"github.com/tenure-dev/tenure/coordinator/store/etcdstore"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// TestServeACLsShared runs two `tenure serve --authorizer on` nodes of one
// HA set and stores an ACL in their etcd: both apply it, within the
// watch's delay, and both refuse what it does not allow.
func TestServeACLsShared(t *testing.T) {
	etcd := testenv.EtcdForTest(t)
	args := []string{"--etcd-endpoints", strings.Join(etcd.Endpoints, ","), "--etcd-prefix", "/tenure-acl/",
		"--data-dir", t.TempDir() + "/unused", "--authorizer", "on", "--election-ttl", "1s"}
	var addrs []string
	for range 2 {
		addr, logs, stop := serveUntil(t, args...)
		t.Cleanup(func() {
			if code := stop(); code != 0 {
				t.Errorf("exit %d; stderr:\n%s", code, logs.String())
			}
		})
		addrs = append(addrs, addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// findCoordinator asks node addr for group g's coordinator, as the
	// anonymous principal.
	findCoordinator := func(addr string) int16 {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey = "g"
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.ErrorCode
	}
	for _, addr := range addrs {
		if code := findCoordinator(addr); code != kerr.GroupAuthorizationFailed.Code {
			t.Fatalf("node %s without ACLs: %v, want GROUP_AUTHORIZATION_FAILED", addr, kerr.ErrorForCode(code))
		}
	}
	b := acl.Binding{ResourceType: kmsg.ACLResourceTypeGroup, ResourceName: "g", PatternType: kmsg.ACLResourcePatternTypeLiteral,
		Principal: "User:ANONYMOUS", Host: "*", Operation: kmsg.ACLOperationDescribe, Permission: kmsg.ACLPermissionTypeAllow}
	start := time.Now()
	if err := etcdstore.NewACLs(etcd.Client(t), etcdstore.Prefix("/tenure-acl/")).CreateACLs(ctx, []acl.Binding{b}); err != nil {
		t.Fatal(err)
	}
	for _, addr := range addrs {
		pollUntil(t, 5*time.Second, "the node to apply the stored ACL", func() string {
			if code := findCoordinator(addr); code != 0 {
				return kerr.ErrorForCode(code).Error()
			}
			return ""
		})
	}
	t.Logf("both nodes applied an ACL stored in etcd within %v", time.Since(start).Round(time.Millisecond))
}
