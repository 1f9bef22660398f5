package web

import (
	"context"
	"errors"
	"net/http"

	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator/server"
	"github.com/tenure-dev/tenure/epoch"
)

// KeySource is implemented by a Source that publishes the coordinator's
// grant-signing keys (ServerSource does): the page lists them, and GET
// /api/keys serves them as epoch.KeySet's JSON, what a resource builds
// its epoch.Verifier from.
type KeySource interface {
	SigningKeys(ctx context.Context) (*epoch.KeySet, error)
}

func (h *Handler) keys(w http.ResponseWriter, r *http.Request) {
	ks, ok := h.src.(KeySource)
	if !ok {
		writeError(w, http.StatusNotFound, "this node publishes no signing keys", nil)
		return
	}
	set, err := ks.SigningKeys(r.Context())
	switch {
	case errors.Is(err, server.ErrSigningOff):
		writeError(w, http.StatusNotFound, "this node does not sign grants (tenure serve --sign-grants)", nil)
	case err != nil:
		h.cfg.log.Warn("status page: reading the signing keys failed", zap.Error(err))
		writeError(w, http.StatusServiceUnavailable, "the signing keys cannot be read now; try again", nil)
	default:
		writeJSON(w, http.StatusOK, set)
	}
}
