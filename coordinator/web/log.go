package web

import (
	"context"
	"errors"

	"github.com/tenure-dev/tenure/coordinator/adminapi"
	"github.com/tenure-dev/tenure/coordinator/server"
)

// The generation log is kept by the server (coordinator.GenerationRecord);
// the page reads it through Source.GenerationLog, in the admin API's JSON
// shape (adminapi.LogEntry), which `tenure groups explain` reads too.

// ErrLogNotAvailable is returned by a Source without a generation log;
// the log endpoint answers it with 501 and the page says so.
var ErrLogNotAvailable = errors.New("web: generation log not available")

// LogEntry, Move and Handoff are the admin API's.
type (
	LogEntry = adminapi.LogEntry
	Move     = adminapi.Move
	Handoff  = adminapi.Handoff
)

// ServerSource is the Source of a running *server.Server.
type ServerSource struct{ *server.Server }

var _ Source = ServerSource{}

// GenerationLog implements Source: it reads the store, so any node of an
// HA set answers.
func (s ServerSource) GenerationLog(ctx context.Context, group string, before int32, limit int) ([]LogEntry, error) {
	recs, err := s.Server.GenerationLog(ctx, group, before, limit)
	if errors.Is(err, server.ErrNoLog) {
		return nil, ErrLogNotAvailable
	}
	if err != nil {
		return nil, err
	}
	out := make([]LogEntry, len(recs))
	for i, r := range recs {
		out[i] = adminapi.FromRecord(r)
	}
	return out, nil
}
