package server

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator/acl"
	"github.com/tenure-dev/tenure/coordinator/store"
)

// Authorization (Config.Authorization) checks every request as Kafka's
// KafkaApis checks it, with the operation Kafka requires on the resource
// Kafka names, and answers a refusal with the code Kafka answers it with
// (GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED,
// CLUSTER_AUTHORIZATION_FAILED). Each API's file says what it checks. The
// principal is the connection's (conn.principal: User:ANONYMOUS until TLS
// or SASL names someone), the host its remote IP address.
//
// The decision is the pure acl.Authorizer's, over the bindings of the ACL
// store: the server holds one Authorizer, swapped whole when the bindings
// change, so a check takes no lock. It is rebuilt at start-up (a store
// that cannot be read stops the start: the server does not serve with
// ACLs it does not know), after every change made through this node
// before that change is answered, when the store's watch reports a change
// made through another node of the HA set (etcd delivers it within
// milliseconds), and every ACLRefresh in case a watch missed one.
//
// Refusals of a request, or of part of one, are counted in
// tenure_authorization_denied_total{api} and logged at debug level with
// the principal, host, resource and operation. Resources a principal may
// not describe are left out of listings (Metadata of every topic,
// ListGroups, OffsetFetch of every topic) silently, as in Kafka, and not
// counted.

// authz is the server's authorization state.
type authz struct {
	on    bool
	store store.ACLStore
	super []string
	cur   atomic.Pointer[acl.Authorizer]

	// mu serializes reloads, so that a slow reload of older bindings
	// never replaces a newer one.
	mu sync.Mutex
}

func newAuthz(cfg *Config) *authz {
	a := &authz{on: cfg.Authorization, store: cfg.ACLStore, super: cfg.SuperUsers}
	if a.store == nil {
		a.store, _ = cfg.Store.(store.ACLStore)
	}
	a.cur.Store(acl.New(nil, a.super))
	return a
}

// changeACLs makes one change to the ACL store, within the store timeout,
// and then rebuilds this node's authorizer, so that the answer to a
// CreateACLs or DeleteACLs holds on this node once it is sent.
func (s *Server) changeACLs(change func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(s.storeCtx, s.cfg.StoreTimeout)
	defer cancel()
	if err := change(ctx); err != nil {
		return err
	}
	return s.reloadACLs(s.storeCtx)
}

// reloadACLs rebuilds the authorizer from the store.
func (s *Server) reloadACLs(ctx context.Context) error {
	a := s.authz
	a.mu.Lock()
	defer a.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	defer cancel()
	bs, err := a.store.LoadACLs(ctx)
	if err != nil {
		return err
	}
	prev := a.cur.Load()
	next := acl.New(bs, a.super)
	a.cur.Store(next)
	s.m.acls.Set(float64(len(next.Bindings())))
	if len(prev.Bindings()) != len(next.Bindings()) {
		s.log.Info("ACLs loaded", zap.Int("bindings", len(next.Bindings())))
	}
	return nil
}

// refreshACLs keeps the authorizer current until ctx ends: on every
// signal of the store's watch, if it has one, and every ACLRefresh.
func (s *Server) refreshACLs(ctx context.Context) {
	var changed <-chan struct{}
	if w, ok := s.authz.store.(store.ACLWatcher); ok {
		changed = w.WatchACLs(ctx)
	}
	follow(ctx, changed, s.cfg.ACLRefresh, func(bool) {
		if err := s.reloadACLs(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("ACLs could not be reloaded; the previous ones stay in force", zap.Error(err))
		}
	})
}

// authorized reports whether c may perform op on the resource, counting
// and logging a refusal against the API of key.
func (s *Server) authorized(c *conn, key kmsg.Key, rt acl.ResourceType, name string, op acl.Operation) bool {
	if !s.authz.on || s.authz.cur.Load().Authorize(c.principal, c.host, rt, name, op) {
		return true
	}
	s.m.denied(key.Int16()).Inc()
	if ce := s.log.Check(zap.DebugLevel, "request denied"); ce != nil {
		ce.Write(zap.String("api", key.Name()), zap.String("principal", c.principal), zap.String("host", c.host),
			zap.Stringer("resource_type", rt), zap.String("resource", name), zap.Stringer("operation", op))
	}
	return false
}

// visible reports whether c may perform op on the resource, without
// counting a refusal: for listings that leave out what c may not see.
func (s *Server) visible(c *conn, rt acl.ResourceType, name string, op acl.Operation) bool {
	return !s.authz.on || s.authz.cur.Load().Authorize(c.principal, c.host, rt, name, op)
}

// Operations Kafka reports as authorized per resource type, in
// IncludeAuthorizedOperations answers.
var (
	groupOps = []acl.Operation{kmsg.ACLOperationRead, kmsg.ACLOperationDelete, kmsg.ACLOperationDescribe}
	topicOps = []acl.Operation{kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationCreate,
		kmsg.ACLOperationDelete, kmsg.ACLOperationAlter, kmsg.ACLOperationDescribe,
		kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs}
)

// authorizedOps is the bit field of ops c may perform on the resource
// (bit i for operation i), as Kafka reports it; with authorization off,
// every op.
func (s *Server) authorizedOps(c *conn, rt acl.ResourceType, name string, ops []acl.Operation) int32 {
	var bits int32
	for _, op := range ops {
		if s.visible(c, rt, name, op) {
			bits |= 1 << op
		}
	}
	return bits
}

// Resource types and operations, shortened for the API files.
const (
	resTopic   = kmsg.ACLResourceTypeTopic
	resGroup   = kmsg.ACLResourceTypeGroup
	resCluster = kmsg.ACLResourceTypeCluster

	opRead     = kmsg.ACLOperationRead
	opCreate   = kmsg.ACLOperationCreate
	opDelete   = kmsg.ACLOperationDelete
	opAlter    = kmsg.ACLOperationAlter
	opDescribe = kmsg.ACLOperationDescribe
)

// startACLs loads the ACLs, if authorization is on, and keeps them
// current until the returned stop is called.
func (s *Server) startACLs(ctx context.Context) (stop func(), err error) {
	if !s.authz.on {
		return func() {}, nil
	}
	if err := s.reloadACLs(ctx); err != nil {
		return nil, fmt.Errorf("server: loading the ACLs: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.refreshACLs(ctx)
	}()
	return func() {
		cancel()
		<-done
	}, nil
}

// groupDenied answers sl GROUP_AUTHORIZATION_FAILED and reports true if c
// may not perform op on group.
func (s *Server) groupDenied(c *conn, sl *slot, group string, op acl.Operation) bool {
	if s.authorized(c, kmsg.Key(sl.key), resGroup, group, op) {
		return false
	}
	c.respond(sl, errorResponse(sl.req, kerr.GroupAuthorizationFailed.Code))
	return true
}

// errNoAuthorizer is the message of SECURITY_DISABLED, the answer to every
// ACL request while authorization is off.
const errNoAuthorizer = "no authorizer is configured on the broker: start tenure with --authorizer on"

// aclChangeRefused returns the code and message that refuse every change
// of an ACL request (API key, verb "create" or "delete") of c, 0 if the
// request may go on: SECURITY_DISABLED while authorization is off, and
// CLUSTER_AUTHORIZATION_FAILED without ALTER on the cluster, as Kafka.
func (s *Server) aclChangeRefused(c *conn, key kmsg.Key, verb string) (int16, string) {
	switch {
	case !s.authz.on:
		return kerr.SecurityDisabled.Code, errNoAuthorizer
	case !s.authorized(c, key, resCluster, acl.ClusterName, opAlter):
		return kerr.ClusterAuthorizationFailed.Code, "ALTER on the cluster is needed to " + verb + " ACLs"
	}
	return 0, ""
}
