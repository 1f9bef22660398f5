// Package adminapi is tenure's HTTP admin API for what the Kafka protocol
// has no request for: a group's generation log, and draining a member.
// The server side mounts on the --http listener next to /metrics and the
// status page; the client side is what `tenure groups explain | drain`
// use.
//
//	GET  /api/groups/{group}/log[?limit=N][&before=EPOCH]   entries, newest first (package web)
//	POST /api/groups/{group}/members/{member}/drain[?remove=true]
//	POST /api/groups/{group}/members/{member}/undrain
//	GET  /api/keys                                          the signing keys (keys.go)
//	POST /api/keys/rotate
//	POST /api/keys/{id}/revoke
//	GET  /api/etcd                                          the etcd's client endpoints (etcd.go)
//	GET  /api/store                                         where the node keeps its state (store.go)
//
// Any node of an HA set answers all three: the log is read from the
// store, and a node that does not lead forwards a drain or undrain to the
// leader's --http listener (once: see ForwardedHeader) and passes its
// answer on.
//
// Errors are JSON objects {"error": message}; the drain routes add "code":
// bad_request, unknown_group, unknown_member, not_drainable,
// not_coordinator (421, with "leader": the coordinating node's Kafka
// address, if one is known: the leader has no --http listener, or none
// leads) or unavailable (503; 502 when the leader could not be reached).
package adminapi

import (
	"time"

	"github.com/tenure-dev/tenure/coordinator"
)

// LogEntry is a generation log entry as the API sends it
// (coordinator.GenerationRecord).
type LogEntry struct {
	Group         string     `json:"group"`
	Epoch         int32      `json:"epoch"`
	Type          string     `json:"type"`
	Time          time.Time  `json:"time"`
	Reason        string     `json:"reason"`
	Members       int        `json:"members"`
	MembersBefore int        `json:"members_before"`
	Joined        []string   `json:"joined"`
	Left          []string   `json:"left"`
	Assigned      bool       `json:"assigned"`
	Moves         []Move     `json:"moves"`
	MovesMin      int        `json:"moves_min"`
	Handoff       Handoff    `json:"handoff"`
	AfterFailover *time.Time `json:"after_failover,omitempty"`
}

// Move is one partition changing owner; "" is nobody.
type Move struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	From      string `json:"from"`
	To        string `json:"to"`
	OldToken  int64  `json:"old_token"`
	NewToken  int64  `json:"new_token"`
}

// Handoff is how the moves played out (coordinator.Handoff), in seconds.
type Handoff struct {
	Done                    bool       `json:"done"`
	Completed               *time.Time `json:"completed,omitempty"`
	Granted                 int        `json:"granted"`
	Superseded              int        `json:"superseded"`
	UnownedPartitionSeconds float64    `json:"unowned_partition_seconds"`
	MaxUnownedSeconds       float64    `json:"max_unowned_seconds"`
}

// FromRecord converts a log record.
func FromRecord(r *coordinator.GenerationRecord) LogEntry {
	e := LogEntry{
		Group: r.Group, Epoch: r.Epoch, Type: r.Type.String(), Time: r.Time.UTC(), Reason: r.Reason,
		Members: r.Members, MembersBefore: r.Members - len(r.Joined) + len(r.Left),
		Joined: nonNil(r.Joined), Left: nonNil(r.Left), Assigned: r.Assigned, MovesMin: r.MinMoves,
		Moves: make([]Move, len(r.Moves)),
		Handoff: Handoff{
			Done: r.Handoff.Done, Granted: r.Handoff.Granted, Superseded: r.Handoff.Superseded,
			UnownedPartitionSeconds: r.Handoff.Unowned.Seconds(), MaxUnownedSeconds: r.Handoff.MaxUnowned.Seconds(),
		},
	}
	for i, m := range r.Moves {
		e.Moves[i] = Move{Topic: m.Topic, Partition: m.Partition, From: m.From, To: m.To,
			OldToken: int64(m.OldToken), NewToken: int64(m.NewToken)}
	}
	if !r.Handoff.Completed.IsZero() {
		t := r.Handoff.Completed.UTC()
		e.Handoff.Completed = &t
	}
	if !r.AfterFailover.IsZero() {
		t := r.AfterFailover.UTC()
		e.AfterFailover = &t
	}
	return e
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
