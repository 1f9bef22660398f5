package server

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/coordinator"
)

// OffsetFetch: v0-9.
//
// Answered per group by the group core (Group.FetchOffsets) while the
// server owns the group, once the offsets read are durable (withGroup). v8+ batches groups; v0-7 name one group, which is
// converted to the batched form and back. A group that does not exist is
// GROUP_ID_NOT_FOUND, as Kafka 4 answers it.
func (s *Server) handleOffsetFetch(req *kmsg.OffsetFetchRequest, now time.Time) kmsg.Response {
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
		resp.Groups = append(resp.Groups, s.fetchGroupOffsets(req, rg, now))
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

func (s *Server) fetchGroupOffsets(req *kmsg.OffsetFetchRequest, rg kmsg.OffsetFetchRequestGroup, now time.Time) kmsg.OffsetFetchResponseGroup {
	failed := func(code int16) kmsg.OffsetFetchResponseGroup {
		sg := kmsg.NewOffsetFetchResponseGroup()
		sg.Group = rg.Group
		sg.ErrorCode = code
		return sg
	}
	var sg kmsg.OffsetFetchResponseGroup
	if code := s.withGroup(rg.Group, now, func(g *coordinator.Group) {
		sg = g.FetchOffsets(now, req.Version, rg, req.RequireStable)
	}); code != 0 {
		return failed(code)
	}
	sg.Group = rg.Group
	return sg
}
