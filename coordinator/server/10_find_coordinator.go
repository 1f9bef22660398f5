package server

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FindCoordinator: v0-4.
//
// Every group's coordinator is this node. v0-3 carry one key, v4 a batch
// (KIP-699). Only group coordinators (type 0) exist: a transaction
// coordinator lookup is INVALID_REQUEST, as Kafka answers an unknown type.
func (s *Server) handleFindCoordinator(req *kmsg.FindCoordinatorRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := req.CoordinatorKeys
	if req.Version <= 3 {
		keys = []string{req.CoordinatorKey}
	}
	for _, key := range keys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		if req.CoordinatorType != 0 {
			c.ErrorCode = kerr.InvalidRequest.Code
			msg := "tenure coordinates consumer groups only"
			c.ErrorMessage = &msg
		} else {
			c.NodeID = s.cfg.NodeID
			c.Host = s.advHost
			c.Port = s.advPort
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	if req.Version <= 3 {
		c := resp.Coordinators[0]
		resp.ErrorCode, resp.ErrorMessage = c.ErrorCode, c.ErrorMessage
		resp.NodeID, resp.Host, resp.Port = c.NodeID, c.Host, c.Port
		if c.ErrorCode != 0 {
			resp.NodeID, resp.Host, resp.Port = -1, "", -1
		}
		resp.Coordinators = nil
	}
	return resp
}
