package web

import (
	"context"
	"errors"
	"time"

	"github.com/tenure-dev/tenure/coordinator/server"
)

// The generation log is kept by the server, not by this package: the page
// only reads it through Source.GenerationLog, as JSON of the shape below.

// ErrLogNotAvailable is returned by a Source without a generation log;
// the log endpoint answers it with 501 and the page says so.
var ErrLogNotAvailable = errors.New("web: generation log not available")

// LogEntry is one generation of a group's log: what changed at one epoch
// and what the hand-off cost.
type LogEntry struct {
	Epoch         int32     `json:"epoch"`
	Time          time.Time `json:"time"`
	Reason        string    `json:"reason"`
	Detail        string    `json:"detail"`
	MembersBefore []string  `json:"members_before"`
	MembersAfter  []string  `json:"members_after"`
	Moves         []Move    `json:"moves"`
	// MovesMin is the fewest moves that would have balanced the group.
	MovesMin int      `json:"moves_min"`
	Handoff  *Handoff `json:"handoff,omitempty"`
}

// Move is one partition that changed owner at a generation.
type Move struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	From      string `json:"from"`
	To        string `json:"to"`
	OldToken  int64  `json:"old_token"`
	NewToken  int64  `json:"new_token"`
}

// Handoff is how the moves of a generation went: whether every moved
// partition has its new owner, the partition-seconds they spent unowned,
// and the longest any of them was.
type Handoff struct {
	Done                    bool    `json:"done"`
	UnownedPartitionSeconds float64 `json:"unowned_partition_seconds"`
	MaxUnownedSeconds       float64 `json:"max_unowned_seconds"`
}

// ServerSource is the Source of a running *server.Server.
type ServerSource struct{ *server.Server }

var _ Source = ServerSource{}

// GenerationLog implements Source. The server keeps no generation log
// yet, so it returns ErrLogNotAvailable; this method is where the log is
// wired in.
func (ServerSource) GenerationLog(ctx context.Context, group string, limit int) ([]LogEntry, error) {
	return nil, ErrLogNotAvailable
}
