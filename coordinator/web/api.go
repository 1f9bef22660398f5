package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/server"
)

// The JSON of the API. Field names are the API's contract with the page
// and with scripts (docs/STATUS-PAGE.md); durations are milliseconds.

type nodeJSON struct {
	ID   int32  `json:"id"`
	Addr string `json:"addr"`
}

// statusJSON says which node answered and who leads: with one leader,
// leading and leader (null when no node leads); with shards, where no node
// leads, shards alone, so that nothing reads as "this node leads" beside
// another node named leader.
type statusJSON struct {
	Node    nodeJSON    `json:"node"`
	Leading *bool       `json:"leading,omitempty"`
	Leader  leaderJSON  `json:"leader,omitzero"`
	Shards  *shardsJSON `json:"shards,omitempty"`
}

// leaderJSON is the leader field: absent with shards, else the leader or
// null.
type leaderJSON struct {
	shown bool
	node  *nodeJSON
}

func (l leaderJSON) IsZero() bool { return !l.shown }

func (l leaderJSON) MarshalJSON() ([]byte, error) { return json.Marshal(l.node) }

type shardsJSON struct {
	Count int `json:"count"`
	// Coordinating lists the shards whose groups this node coordinates.
	Coordinating []int `json:"coordinating"`
}

type groupsJSON struct {
	statusJSON
	Groups []summaryJSON `json:"groups"`
}

type summaryJSON struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	State   string `json:"state"`
	Epoch   int32  `json:"epoch"`
	Members int    `json:"members"`
	Owned   int    `json:"owned"`
	Unowned int    `json:"unowned"`
}

type groupJSON struct {
	Name         string       `json:"name"`
	Type         string       `json:"type"`
	State        string       `json:"state"`
	Epoch        int32        `json:"epoch"`
	TargetEpoch  int32        `json:"target_epoch"`
	Protocol     string       `json:"protocol"`
	ProtocolType string       `json:"protocol_type"`
	Leader       string       `json:"leader"`
	Members      []memberJSON `json:"members"`
	Topics       []topicJSON  `json:"topics"`
	Owned        int          `json:"owned"`
	Unowned      int          `json:"unowned"`
}

type memberJSON struct {
	ID               string `json:"id"`
	InstanceID       string `json:"instance_id"`
	ClientID         string `json:"client_id"`
	ClientHost       string `json:"client_host"`
	Rack             string `json:"rack"`
	Epoch            int32  `json:"epoch"`
	State            string `json:"state"`
	HeartbeatAgeMs   int64  `json:"heartbeat_age_ms"`
	SessionTimeoutMs int64  `json:"session_timeout_ms"`
	// Partitions counts the partitions the member owns, Revoking those of
	// them it must release, Pending those of its target others hold.
	Partitions int `json:"partitions"`
	Revoking   int `json:"revoking"`
	Pending    int `json:"pending"`
}

type topicJSON struct {
	Name       string          `json:"name"`
	Partitions []partitionJSON `json:"partitions"`
}

type partitionJSON struct {
	Partition int32 `json:"partition"`
	// Owner is "" for an unowned partition, whose Token is 0.
	Owner    string `json:"owner"`
	Token    int64  `json:"token"`
	Revoking bool   `json:"revoking"`
	Target   string `json:"target"`
}

type errorJSON struct {
	Error string `json:"error"`
	// Leader is set on a node that does not lead, when one does.
	Leader *nodeJSON `json:"leader,omitempty"`
}

func toStatus(l server.Leadership) statusJSON {
	s := statusJSON{Node: nodeJSON{l.Self.ID, l.Self.Addr}}
	if l.Shards != nil {
		s.Shards = &shardsJSON{Count: l.Shards.Count, Coordinating: l.Shards.Coordinating}
		return s
	}
	s.Leading = &l.Leading
	s.Leader.shown = true
	if l.LeaderKnown {
		s.Leader.node = &nodeJSON{l.Leader.ID, l.Leader.Addr}
	}
	return s
}

func toGroup(v coordinator.GroupView) groupJSON {
	g := groupJSON{Name: v.Name, Type: v.Type.String(), State: v.State, Epoch: v.Epoch, TargetEpoch: v.TargetEpoch,
		Protocol: v.Protocol, ProtocolType: v.ProtocolType, Leader: v.Leader,
		Members: make([]memberJSON, len(v.Members)), Topics: []topicJSON{},
		Owned: len(v.Partitions) - v.Unowned, Unowned: v.Unowned}
	for i, m := range v.Members {
		g.Members[i] = memberJSON{ID: m.ID, InstanceID: m.InstanceID, ClientID: m.ClientID, ClientHost: m.ClientHost,
			Rack: m.Rack, Epoch: m.Epoch, State: m.State, HeartbeatAgeMs: m.SinceHeartbeat.Milliseconds(),
			SessionTimeoutMs: m.SessionTimeout.Milliseconds(),
			Partitions:       len(m.Assigned) + len(m.Revoking), Revoking: len(m.Revoking), Pending: len(m.Pending)}
	}
	for _, p := range v.Partitions { // sorted by topic
		if n := len(g.Topics); n == 0 || g.Topics[n-1].Name != p.Topic {
			g.Topics = append(g.Topics, topicJSON{Name: p.Topic})
		}
		t := &g.Topics[len(g.Topics)-1]
		t.Partitions = append(t.Partitions, partitionJSON{Partition: p.Partition, Owner: p.Owner, Token: int64(p.Token),
			Revoking: p.Revoking, Target: p.Target})
	}
	return g
}

func (h *Handler) groups(w http.ResponseWriter, r *http.Request) {
	out := groupsJSON{statusJSON: toStatus(h.src.Leadership()), Groups: []summaryJSON{}}
	sums, err := h.src.Groups()
	if err != nil && !errors.Is(err, server.ErrNotLeading) {
		h.fail(w, r, err)
		return
	}
	// A node that does not lead has no group to list: the page shows the
	// leader instead.
	for _, s := range sums {
		out.Groups = append(out.Groups, summaryJSON{Name: s.Name, Type: s.Type.String(), State: s.State, Epoch: s.Epoch,
			Members: s.Members, Owned: s.Owned, Unowned: s.Unowned})
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *Handler) group(w http.ResponseWriter, r *http.Request) {
	v, err := h.src.GroupView(r.PathValue("group"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toGroup(v))
}

// Bounds of the log endpoint's limit.
const (
	defaultLogLimit = 50
	maxLogLimit     = 1000
)

func (h *Handler) log(w http.ResponseWriter, r *http.Request) {
	limit := defaultLogLimit
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxLogLimit {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("limit %q: want a whole number from 1 to %d", s, maxLogLimit), nil)
			return
		}
		limit = n
	}
	var before int32
	if s := r.URL.Query().Get("before"); s != "" {
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("before %q: want a positive epoch", s), nil)
			return
		}
		before = int32(n)
	}
	entries, err := h.src.GenerationLog(r.Context(), r.PathValue("group"), before, limit)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if entries == nil {
		entries = []LogEntry{}
	}
	writeJSON(w, http.StatusOK, entries)
}

// problem maps a Source error to its status and message; leader is set
// when this node does not lead and another does.
func (h *Handler) problem(err error) (status int, msg string, leader *nodeJSON) {
	var nc *server.NotCoordinatorError
	switch {
	case errors.Is(err, server.ErrGroupNotFound):
		return http.StatusNotFound, "no such group", nil
	case errors.As(err, &nc):
		// With shards, each group has a coordinator of its own.
		if !nc.HasLeader {
			return http.StatusServiceUnavailable, "no node coordinates the group now: its shard or the leadership is moving", nil
		}
		to := &nodeJSON{nc.Leader.ID, nc.Leader.Addr}
		return http.StatusServiceUnavailable,
			fmt.Sprintf("node %d at %s coordinates the group", to.ID, to.Addr), to
	case errors.Is(err, server.ErrNotLeading):
		l := h.src.Leadership()
		if l.Shards != nil {
			return http.StatusServiceUnavailable, "this node coordinates no shard now: the group's shard's owner serves it", nil
		}
		if !l.LeaderKnown || l.Leading {
			return http.StatusServiceUnavailable, "this node does not lead, and no node leads now: an election is under way", nil
		}
		return http.StatusServiceUnavailable,
			fmt.Sprintf("this node follows; the leader is node %d at %s", l.Leader.ID, l.Leader.Addr), &nodeJSON{l.Leader.ID, l.Leader.Addr}
	case errors.Is(err, server.ErrGroupUnavailable):
		return http.StatusServiceUnavailable, "the group is offline until it is reloaded from the store; try again", nil
	case errors.Is(err, ErrLogNotAvailable):
		return http.StatusNotImplemented, "generation log not available", nil
	}
	return http.StatusInternalServerError, "internal error", nil
}

func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, msg, leader := h.problem(err)
	if status == http.StatusInternalServerError {
		h.cfg.log.Error("status page: read failed", zap.String("path", r.URL.Path), zap.Error(err))
	}
	writeError(w, status, msg, leader)
}

func writeError(w http.ResponseWriter, status int, msg string, leader *nodeJSON) {
	writeJSON(w, status, errorJSON{Error: msg, Leader: leader})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only a bug gets here: every value is a plain struct.
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
