package server

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// DeleteGroups: v0-2.
//
// Each group is deleted by the group core (Group.Delete: NON_EMPTY_GROUP
// unless it has no members) while the server owns it; the deletion is
// persisted like any other change, and the group is then forgotten. A
// group that does not exist is GROUP_ID_NOT_FOUND.
func (s *Server) handleDeleteGroups(req *kmsg.DeleteGroupsRequest, now time.Time) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, name := range req.Groups {
		dg := kmsg.NewDeleteGroupsResponseGroup()
		dg.Group = name
		dg.ErrorCode = s.deleteGroup(name, now)
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

func (s *Server) deleteGroup(name string, now time.Time) int16 {
	e := s.groups.lookup(name)
	if e == nil {
		return kerr.GroupIDNotFound.Code
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.failed:
		return kerr.CoordinatorNotAvailable.Code
	case e.gone:
		return kerr.GroupIDNotFound.Code
	}
	code := e.g.Delete(now)
	s.performReady(e, nil)
	if e.failed {
		return kerr.CoordinatorNotAvailable.Code
	}
	if code == 0 {
		if !e.gone {
			// The core reported success without marking itself deleted.
			s.groups.remove(e)
		}
		s.log.Info("group deleted", zap.String("group", name))
	}
	return code
}
