package server

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator/acl"
)

// Metadata: v0-12.
//
// One broker, this node, at the address advertised on the client's
// listener; it leads every partition and is the controller. In an HA set
// (view.go): every live node that has the client's listener, each
// departed node's broker ID at its successor's address, and partition
// leadership spread over the live nodes. Topics are listed with their stable IDs
// (v10+) and partitions 0..N-1. A null topic list (v1+; an empty one at
// v0) lists every topic, sorted by name. An unknown topic is created with
// DefaultPartitions when the request allows auto-creation (implicit before
// v4) and AutoCreateTopics is on; otherwise it is UNKNOWN_TOPIC_OR_PARTITION
// (UNKNOWN_TOPIC_ID when asked by ID). A creation refused by a limit is
// POLICY_VIOLATION, an invalid name INVALID_TOPIC_EXCEPTION. v10+ carries
// the topic IDs that KIP-848 clients need.
//
// Authorization, as Kafka's: a listing of every topic leaves out those
// the client may not DESCRIBE. A topic asked for by name that it may not
// DESCRIBE is TOPIC_AUTHORIZATION_FAILED, whether or not it exists, and is
// never created; one asked for by ID is TOPIC_AUTHORIZATION_FAILED without
// its name (an unknown ID stays UNKNOWN_TOPIC_ID: IDs reveal nothing). An
// auto-creation needs CREATE on the cluster or on the topic, else the
// topic is TOPIC_AUTHORIZATION_FAILED. Topic authorized operations (v8+)
// are reported when asked for.

func init() {
	register(api{
		key: 3, min: 0, max: 12,
		aliasFree: true,
		handle: func(s *Server, c *conn, sl *slot, now time.Time) {
			c.respond(sl, s.handleMetadata(c, sl.req.(*kmsg.MetadataRequest), now))
		},
		errorResponse: func(req kmsg.Request, code int16) kmsg.Response {
			resp := req.ResponseKind().(*kmsg.MetadataResponse)
			for _, rt := range req.(*kmsg.MetadataRequest).Topics {
				st := kmsg.NewMetadataResponseTopic()
				st.Topic, st.TopicID, st.ErrorCode = rt.Topic, rt.TopicID, code
				resp.Topics = append(resp.Topics, st)
			}
			return resp
		},
		responseCode: func(resp kmsg.Response) int16 {
			return firstCode(resp.(*kmsg.MetadataResponse).Topics, func(t *kmsg.MetadataResponseTopic) int16 { return t.ErrorCode })
		},
	})
}

func (s *Server) handleMetadata(c *conn, req *kmsg.MetadataRequest, now time.Time) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	brokers, live := s.metadataBrokers(now)
	var leaders []int32 // the live nodes the client can reach
	for _, n := range brokers {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID = n.ID
		var ok bool
		if b.Host, b.Port, ok = n.hostPortOn(c.ln.Name); ok { // the client's listener only, as Kafka
			resp.Brokers = append(resp.Brokers, b)
			if slices.Contains(live, n.ID) {
				leaders = append(leaders, n.ID)
			}
		}
	}
	self := s.self().ID
	if len(leaders) == 0 {
		leaders = []int32{self}
	}
	resp.ClusterID = &s.cfg.ClusterID
	resp.ControllerID = self
	if c, ok := s.controllerNode(now); ok {
		resp.ControllerID = c.ID
	}

	add := func(t *topic) {
		rt := kmsg.NewMetadataResponseTopic()
		name := t.name
		rt.Topic = &name
		rt.TopicID = t.id
		rt.Partitions = t.metadataPartitions(leaders)
		if req.IncludeTopicAuthorizedOperations {
			rt.AuthorizedOperations = s.authorizedOps(c, resTopic, name, topicOps)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	addErr := func(name *string, id [16]byte, code int16) {
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic = name
		rt.TopicID = id
		rt.ErrorCode = code
		resp.Topics = append(resp.Topics, rt)
	}

	if req.Topics == nil || req.Version == 0 && len(req.Topics) == 0 {
		for _, name := range s.topics.Names() {
			if t := s.topics.get(name); t != nil && s.visible(c, resTopic, name, opDescribe) {
				add(t)
			}
		}
		return resp
	}

	allowAuto := s.cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
	// Kafka asks the cluster once and the topics only without it.
	createAll := allowAuto && s.visible(c, resCluster, acl.ClusterName, opCreate)
	if s.cfg.Cluster != nil {
		// Another node of the HA set may have just created a topic asked
		// for: look it up before calling it unknown. A topic this node
		// would create anyway needs no look-up: the creation finds the
		// other node's.
		var names []string
		var ids [][16]byte
		for _, rt := range req.Topics {
			switch {
			case rt.TopicID != [16]byte{}:
				ids = append(ids, rt.TopicID)
			case rt.Topic != nil && !allowAuto:
				names = append(names, *rt.Topic)
			}
		}
		if s.knowTopics(names, ids) {
			now = time.Now()
		}
	}
	created := false
	seen := make(map[string]bool, len(req.Topics))
	for _, rt := range req.Topics {
		if rt.TopicID != ([16]byte{}) {
			t := s.topics.getID(rt.TopicID)
			if t == nil {
				addErr(nil, rt.TopicID, kerr.UnknownTopicID.Code)
				continue
			}
			if !s.authorized(c, kmsg.Metadata, resTopic, t.name, opDescribe) {
				addErr(nil, rt.TopicID, kerr.TopicAuthorizationFailed.Code)
				continue
			}
			if !seen[t.name] {
				seen[t.name] = true
				add(t)
			}
			continue
		}
		if rt.Topic == nil {
			continue
		}
		name := *rt.Topic
		if seen[name] {
			continue
		}
		seen[name] = true
		if !s.authorized(c, kmsg.Metadata, resTopic, name, opDescribe) {
			addErr(rt.Topic, [16]byte{}, kerr.TopicAuthorizationFailed.Code)
			continue
		}
		t := s.topics.get(name)
		if t == nil {
			if allowAuto && !createAll && !s.authorized(c, kmsg.Metadata, resTopic, name, opCreate) {
				addErr(rt.Topic, [16]byte{}, kerr.TopicAuthorizationFailed.Code)
				continue
			}
			if !allowAuto {
				s.unknownTopic(c.clientID, c.host, name, "metadata")
				addErr(rt.Topic, [16]byte{}, kerr.UnknownTopicOrPartition.Code)
				continue
			}
			var err error
			t, err = s.createTopic(name, s.cfg.DefaultPartitions, "metadata")
			if err != nil && err != errTopicExists {
				addErr(rt.Topic, [16]byte{}, topicCode(err))
				continue
			}
			created = created || err == nil
		}
		add(t)
	}
	if created {
		s.topicsChanged(now)
	}
	return resp
}

// createTopic creates a topic and logs it; the caller calls topicsChanged
// once it has created everything it will.
func (s *Server) createTopic(name string, partitions int32, via string) (*topic, error) {
	t, err := s.topics.create(name, partitions, s.persistTopic)
	switch {
	case errors.Is(err, errTopicStore):
		s.log.Error("topic not created: the store failed", zap.String("topic", name), zap.Error(err))
		return t, err
	}
	switch err {
	case nil:
		s.m.topics.Set(float64(s.topics.Len()))
		s.log.Info("topic created", zap.String("topic", name), zap.Int32("partitions", partitions), zap.String("via", via))
	case errTopicLimit:
		s.m.limits.WithLabelValues("topics").Inc()
		s.log.Warn("topic refused: topic limit reached", zap.String("topic", name), zap.Int("limit", s.cfg.MaxTopics))
	case errPartitionsMax:
		s.m.limits.WithLabelValues("partitions").Inc()
	}
	return t, err
}

// persistTopic makes a new topic durable before anyone sees it, and
// returns the topic as stored: another node of an HA set may have created
// the name first, and then its ID is the topic's.
func (s *Server) persistTopic(t *topic) (*topic, error) {
	ctx, cancel := context.WithTimeout(s.storeCtx, s.cfg.StoreTimeout)
	defer cancel()
	rec, err := s.topicStore.CreateTopic(ctx, t.record())
	if err != nil {
		return nil, err
	}
	return &topic{name: rec.Name, id: rec.ID, partitions: rec.Partitions}, nil
}
