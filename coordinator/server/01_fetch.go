package server

import (
	"cmp"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/coordinator"
)

// Fetch: v0-16.
//
// From v13 topics are named by ID (@platformatic/kafka fetches only by ID:
// its v12 request carries the ID where the name belongs); an unknown ID is
// UNKNOWN_TOPIC_ID.
//
// Topics hold no records, so a Fetch is answered empty and error-free
// (high watermark, last stable offset and log start offset 0) after being
// held for its MaxWaitMillis, capped at MaxFetchWait: an immediate empty
// answer would make a kgo consumer fetch again at once, thousands of times
// a second. A held Fetch parks only its own slot: other connections are
// unaffected, and later responses on its connection wait for it, in order.
// A Fetch naming a partition that does not exist is answered at once, with
// UNKNOWN_TOPIC_OR_PARTITION for it. Incremental fetch sessions are not
// kept: the session ID is always 0, and a request naming a session gets
// FETCH_SESSION_ID_NOT_FOUND.
//
// Authorization: READ on each topic, else TOPIC_AUTHORIZATION_FAILED for
// its partitions (before their existence is checked, as in Kafka), which
// answers the Fetch at once. A connection holding MaxParkedPerConnection
// requests already gets its Fetch answered at once (slot.go).
//
// In an HA set, after each change of the set that clients must hear of
// (view.go), the Fetches parked then, and each connection's next Fetch,
// are answered "moved" for every partition, once (and, within ViewSettle
// of a change that departed a node, a new connection's first Fetch:
// clusterView.connGen): stock clients then
// reload metadata, which moves them off a dead node, and look their
// coordinator up again. Moved is FENCED_LEADER_EPOCH from v13 (clients
// that fetch by topic ID, which all follow KIP-320), NOT_LEADER_OR_FOLLOWER
// before: @platformatic/kafka drops its cached metadata in its fetch path
// on FENCED_LEADER_EPOCH only (consumer.js, #fetch: clearMetadata), and
// its fetch retries look the leader's node ID up in that metadata, so
// after the reload a retry for a dead leader reaches the ID's alias and is
// served, where a retry on stale metadata dials the dead address until
// the stream gives up (docs/FAILOVER.md). kgo reloads metadata on either
// (with nothing consumed it validates no epoch: source.go). Older clients
// (kafkajs 2.2.4 and librdkafka 2.0.2 fetch v11, kafka-python 2.0.2 v10)
// keep the answer they were measured with.

func init() {
	register(api{
		key: 1, min: 0, max: 16,
		aliasFree: true,
		handle: func(s *Server, c *conn, sl *slot, _ time.Time) {
			s.handleFetch(c, sl, sl.req.(*kmsg.FetchRequest))
		},
		errorResponse: fetchErrorResponse,
		responseCode:  fetchResponseCode,
	})
}

// movedFencedFrom is the first Fetch version told "moved" with
// FENCED_LEADER_EPOCH: the first that names topics by ID.
const movedFencedFrom = 13

func (s *Server) handleFetch(c *conn, sl *slot, req *kmsg.FetchRequest) {
	if s.view != nil {
		if g := s.view.told(); c.viewGen.Swap(g) != g {
			c.respond(sl, movedFetch(req))
			return
		}
	}
	resp := emptyFetch(req, s.topics)
	if s.authz.on {
		for i := range resp.Topics {
			st := &resp.Topics[i]
			if s.authorized(c, kmsg.Fetch, resTopic, st.Topic, opRead) {
				continue
			}
			for j := range st.Partitions {
				p := &st.Partitions[j]
				p.ErrorCode = kerr.TopicAuthorizationFailed.Code
				p.HighWatermark, p.LastStableOffset, p.LogStartOffset = -1, -1, -1
			}
		}
	}
	if req.Version >= 7 && req.SessionID != 0 {
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
		resp.Topics = nil
	}
	wait := min(time.Duration(req.MaxWaitMillis)*time.Millisecond, s.cfg.MaxFetchWait)
	if wait <= 0 || responseCode(resp) != 0 || !s.parkAllowed(c) {
		c.respond(sl, resp)
		return
	}
	c.park(sl, resp, wait)
}

// emptyFetch answers req with no records. With topics set, partitions that
// do not exist get UNKNOWN_TOPIC_OR_PARTITION.
func emptyFetch(req *kmsg.FetchRequest, topics *topicRegistry) *kmsg.FetchResponse {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic = rt.Topic
		st.TopicID = rt.TopicID
		var t *topic
		unknown := kerr.UnknownTopicOrPartition.Code
		switch {
		case topics == nil:
		case req.Version >= 13:
			if t = topics.getID(coordinator.TopicID(rt.TopicID)); t != nil {
				// Named for authorization and the logs; v13+ encodes
				// only the ID.
				st.Topic = t.name
			}
			unknown = kerr.UnknownTopicID.Code
		default:
			t = topics.get(rt.Topic)
		}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.HighWatermark = 0
			sp.LastStableOffset = 0
			sp.LogStartOffset = 0
			// An empty record set, not a null one: librdkafka (which
			// fetches v0 from a broker without Produce) and kafka-python
			// fail to parse a null set, and kafka-python's poll raises.
			sp.RecordBatches = []byte{}
			if topics != nil && (t == nil || rp.Partition < 0 || rp.Partition >= t.partitions) {
				sp.ErrorCode = unknown
				sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// movedFetch answers every partition of req with the moved signal:
// FENCED_LEADER_EPOCH from v13, NOT_LEADER_OR_FOLLOWER before.
func movedFetch(req *kmsg.FetchRequest) *kmsg.FetchResponse {
	code := kerr.NotLeaderForPartition.Code
	if req.Version >= movedFencedFrom {
		code = kerr.FencedLeaderEpoch.Code
	}
	resp := emptyFetch(req, nil)
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			p := &resp.Topics[i].Partitions[j]
			p.ErrorCode = code
			p.HighWatermark, p.LastStableOffset, p.LogStartOffset = -1, -1, -1
		}
	}
	return resp
}

// moved answers c's parked Fetches NOT_LEADER_OR_FOLLOWER for the view
// change gen, which then counts as told.
func (c *conn) moved(gen uint64) {
	type parked struct {
		sl  *slot
		seq uint64
		req *kmsg.FetchRequest
	}
	if c.viewGen.Load() == gen {
		return // a Fetch already carried this change
	}
	var ps []parked
	c.mu.Lock()
	for _, sl := range c.q[c.head:] {
		if req, ok := sl.req.(*kmsg.FetchRequest); ok && sl.state == slotWaiting && sl.timer != nil {
			ps = append(ps, parked{sl, sl.seq, req})
		}
	}
	c.mu.Unlock()
	if len(ps) == 0 {
		return
	}
	c.viewGen.Store(gen)
	for _, p := range ps {
		c.deliver(p.sl, movedFetch(p.req), p.seq, true)
	}
}

// park holds sl until d has passed, then completes it with resp.
func (c *conn) park(sl *slot, resp kmsg.Response, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || sl.state != slotWaiting {
		return
	}
	seq := sl.seq
	sl.held = resp
	sl.timer = time.AfterFunc(d, func() { c.deliver(sl, resp, seq, true) })
}

// fetchErrorResponse refuses every partition of req with code, and the
// whole request too from v7, where Fetch has a top-level code. No path
// sends it today: a Fetch is answered or held, and a held one is answered
// at shutdown with the answer it is held with.
func fetchErrorResponse(req kmsg.Request, code int16) kmsg.Response {
	resp := emptyFetch(req.(*kmsg.FetchRequest), nil)
	resp.ErrorCode = code
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			p := &resp.Topics[i].Partitions[j]
			p.ErrorCode = code
			p.HighWatermark, p.LastStableOffset, p.LogStartOffset = -1, -1, -1
		}
	}
	return resp
}

func fetchResponseCode(resp kmsg.Response) int16 {
	r := resp.(*kmsg.FetchResponse)
	return cmp.Or(r.ErrorCode, firstCode(r.Topics, func(t *kmsg.FetchResponseTopic) int16 {
		return firstCode(t.Partitions, func(p *kmsg.FetchResponseTopicPartition) int16 { return p.ErrorCode })
	}))
}
