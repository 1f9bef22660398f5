package server

import (
	"cmp"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/coordinator"
)

// OffsetFetch: v0-9.
//
// Answered per group by the group core (Group.FetchOffsets) while the
// server owns the group, once the offsets read are durable (withGroup). v8+ batches groups; v0-7 name one group, which is
// converted to the batched form and back. A group that does not exist is
// GROUP_ID_NOT_FOUND, as Kafka 4 answers it.
//
// Authorization, as Kafka's: DESCRIBE on each group, else the group is
// GROUP_AUTHORIZATION_FAILED (v0-7: the whole response); then, of the
// topics asked for, those the client may not DESCRIBE are
// TOPIC_AUTHORIZATION_FAILED (offset -1), and of all topics (none asked
// for) they are left out.

func init() {
	register(api{
		key: 9, min: 0, max: 9,
		aliasFree: true,
		handle: func(s *Server, c *conn, sl *slot, now time.Time) {
			c.respond(sl, s.handleOffsetFetch(c, sl.req.(*kmsg.OffsetFetchRequest), now))
		},
		errorResponse: offsetFetchErrorResponse,
		responseCode: func(resp kmsg.Response) int16 {
			r := resp.(*kmsg.OffsetFetchResponse)
			return cmp.Or(r.ErrorCode, firstCode(r.Groups, func(g *kmsg.OffsetFetchResponseGroup) int16 { return g.ErrorCode }))
		},
	})
}

func (s *Server) handleOffsetFetch(c *conn, req *kmsg.OffsetFetchRequest, now time.Time) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	groups := req.Groups
	if req.Version <= 7 {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = req.Group
		if req.Topics != nil {
			rg.Topics = make([]kmsg.OffsetFetchRequestGroupTopic, 0, len(req.Topics))
			for _, t := range req.Topics {
				rt := kmsg.NewOffsetFetchRequestGroupTopic()
				rt.Topic = t.Topic
				rt.Partitions = t.Partitions
				rg.Topics = append(rg.Topics, rt)
			}
		}
		groups = []kmsg.OffsetFetchRequestGroup{rg}
	}
	for _, rg := range groups {
		resp.Groups = append(resp.Groups, s.fetchGroupOffsets(c, req, rg, now))
	}
	if req.Version <= 7 {
		g0 := resp.Groups[0]
		resp.Groups = nil
		resp.ErrorCode = g0.ErrorCode
		for _, t := range g0.Topics {
			st := kmsg.NewOffsetFetchResponseTopic()
			st.Topic = t.Topic
			for _, p := range t.Partitions {
				sp := kmsg.NewOffsetFetchResponseTopicPartition()
				sp.Partition = p.Partition
				sp.Offset = p.Offset
				sp.LeaderEpoch = p.LeaderEpoch
				sp.Metadata = p.Metadata
				sp.ErrorCode = p.ErrorCode
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
	}
	return resp
}

func (s *Server) fetchGroupOffsets(c *conn, req *kmsg.OffsetFetchRequest, rg kmsg.OffsetFetchRequestGroup, now time.Time) kmsg.OffsetFetchResponseGroup {
	failed := func(code int16) kmsg.OffsetFetchResponseGroup {
		sg := kmsg.NewOffsetFetchResponseGroup()
		sg.Group = rg.Group
		sg.ErrorCode = code
		return sg
	}
	if !s.authorized(c, kmsg.OffsetFetch, resGroup, rg.Group, opDescribe) {
		return failed(kerr.GroupAuthorizationFailed.Code)
	}
	var sg kmsg.OffsetFetchResponseGroup
	if code := s.withGroup(rg.Group, now, func(g *coordinator.Group) {
		sg = g.FetchOffsets(now, req.Version, rg, req.RequireStable)
	}); code != 0 {
		return failed(code)
	}
	sg.Group = rg.Group
	if s.authz.on && sg.ErrorCode == 0 {
		s.hideOffsets(c, rg, &sg)
	}
	return sg
}

// hideOffsets applies topic authorization to a group's fetched offsets:
// the topics c may not DESCRIBE are refused if rg asked for them and left
// out if it asked for all.
func (s *Server) hideOffsets(c *conn, rg kmsg.OffsetFetchRequestGroup, sg *kmsg.OffsetFetchResponseGroup) {
	var kept []kmsg.OffsetFetchResponseGroupTopic
	for _, st := range sg.Topics {
		if s.visible(c, resTopic, st.Topic, opDescribe) {
			kept = append(kept, st)
		}
	}
	sg.Topics = kept
	for _, rt := range rg.Topics {
		if s.authorized(c, kmsg.OffsetFetch, resTopic, rt.Topic, opDescribe) {
			continue
		}
		st := kmsg.NewOffsetFetchResponseGroupTopic()
		st.Topic = rt.Topic
		for _, p := range rt.Partitions {
			sp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
			sp.Partition, sp.Offset, sp.ErrorCode = p, -1, kerr.TopicAuthorizationFailed.Code
			st.Partitions = append(st.Partitions, sp)
		}
		sg.Topics = append(sg.Topics, st)
	}
}

// offsetFetchErrorResponse refuses every group of req with code: per group
// from v8, else at the top level and, because v0-1 have no top-level code,
// on every partition asked for.
func offsetFetchErrorResponse(req kmsg.Request, code int16) kmsg.Response {
	r := req.(*kmsg.OffsetFetchRequest)
	resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
	if r.Version >= 8 {
		for _, rg := range r.Groups {
			sg := kmsg.NewOffsetFetchResponseGroup()
			sg.Group, sg.ErrorCode = rg.Group, code
			resp.Groups = append(resp.Groups, sg)
		}
		return resp
	}
	resp.ErrorCode = code
	for _, rt := range r.Topics {
		st := kmsg.NewOffsetFetchResponseTopic()
		st.Topic = rt.Topic
		for _, p := range rt.Partitions {
			sp := kmsg.NewOffsetFetchResponseTopicPartition()
			sp.Partition, sp.Offset, sp.ErrorCode = p, -1, code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
