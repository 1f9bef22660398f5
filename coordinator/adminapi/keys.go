package adminapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/tenure-dev/tenure/coordinator/server"
	"github.com/tenure-dev/tenure/coordinator/store"
	"github.com/tenure-dev/tenure/epoch"
)

// The signing keys (tenure serve --sign-grants): the public keys that
// fences verify signed tokens with, and their rotation.
//
//	GET  /api/keys                  the key set (epoch.KeySet's JSON), oldest first
//	POST /api/keys/rotate           a new key, pending for the nodes' --key-publish-delay
//	                                (then active; the active one retires)
//	POST /api/keys/rotate?now=true  the pending key, else a new one, active at once
//	POST /api/keys/{id}/revoke      a retired or pending key stops verifying at once
//
// Any node answers all three: the keys are the store's, shared by the HA
// set, and every node follows a change through its watch. The mutating
// routes answer the new key set. Errors: signing_off (404: the node does
// not sign grants), unknown_key (404), active_key (409: rotate first),
// rotation_pending (409: a rotation is pending; ?now=true activates it),
// bad_request (400), unavailable (503: the store).

// KeySource is what the key routes serve: *server.Server.
type KeySource interface {
	SigningKeys(ctx context.Context) (*epoch.KeySet, error)
	RotateKey(ctx context.Context) (*epoch.KeySet, error)
	RotateKeyNow(ctx context.Context) (*epoch.KeySet, error)
	RevokeKey(ctx context.Context, id epoch.KeyID) (*epoch.KeySet, error)
}

// registerKeys adds the key routes to mux.
func registerKeys(mux *http.ServeMux, src KeySource) {
	mux.HandleFunc("GET /api/keys", func(w http.ResponseWriter, r *http.Request) {
		keyAnswer(w, r, func(ctx context.Context) (*epoch.KeySet, error) { return src.SigningKeys(ctx) })
	})
	mux.HandleFunc("POST /api/keys/rotate", func(w http.ResponseWriter, r *http.Request) {
		rotate := src.RotateKey
		switch r.URL.Query().Get("now") {
		case "", "false":
		case "true":
			rotate = src.RotateKeyNow
		default:
			writeError(w, http.StatusBadRequest, "bad_request", "now must be true or false", "")
			return
		}
		keyAnswer(w, r, rotate)
	})
	mux.HandleFunc("POST /api/keys/{id}/revoke", func(w http.ResponseWriter, r *http.Request) {
		id, err := epoch.ParseKeyID(r.PathValue("id"))
		if err != nil {
			writeError(w, http.StatusBadRequest, "bad_request", err.Error(), "")
			return
		}
		keyAnswer(w, r, func(ctx context.Context) (*epoch.KeySet, error) { return src.RevokeKey(ctx, id) })
	})
}

func keyAnswer(w http.ResponseWriter, r *http.Request, do func(context.Context) (*epoch.KeySet, error)) {
	ks, err := do(r.Context())
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, ks)
	case errors.Is(err, server.ErrSigningOff):
		writeError(w, http.StatusNotFound, "signing_off", err.Error(), "")
	case errors.Is(err, store.ErrNoSuchKey):
		writeError(w, http.StatusNotFound, "unknown_key", err.Error(), "")
	case errors.Is(err, store.ErrActiveKey):
		writeError(w, http.StatusConflict, "active_key", err.Error(), "")
	case errors.Is(err, store.ErrRotationPending):
		writeError(w, http.StatusConflict, "rotation_pending", err.Error(), "")
	default:
		writeError(w, http.StatusServiceUnavailable, "unavailable", err.Error(), "")
	}
}

// Keys returns the node's signing keys: what a fence's epoch.Verifier is
// built with (epoch.NewVerifier; SetKeys after a rotation).
func (c *Client) Keys(ctx context.Context) (*epoch.KeySet, error) {
	return c.keys(ctx, http.MethodGet, "/api/keys")
}

// RotateKey publishes a new key, which the nodes make active (retiring
// the active one) after their publish delay, returning the new key set.
func (c *Client) RotateKey(ctx context.Context) (*epoch.KeySet, error) {
	return c.keys(ctx, http.MethodPost, "/api/keys/rotate")
}

// RotateKeyNow makes the pending key, or a new one, active at once,
// returning the new key set.
func (c *Client) RotateKeyNow(ctx context.Context) (*epoch.KeySet, error) {
	return c.keys(ctx, http.MethodPost, "/api/keys/rotate?now=true")
}

// RevokeKey revokes the retired key id, returning the new key set.
func (c *Client) RevokeKey(ctx context.Context, id epoch.KeyID) (*epoch.KeySet, error) {
	return c.keys(ctx, http.MethodPost, "/api/keys/"+string(id)+"/revoke")
}

func (c *Client) keys(ctx context.Context, method, path string) (*epoch.KeySet, error) {
	var raw rawJSON
	if err := c.do(ctx, method, path, &raw); err != nil {
		return nil, err
	}
	return epoch.ParseKeySet(raw)
}

// rawJSON keeps a response body as it came.
type rawJSON []byte

func (r *rawJSON) UnmarshalJSON(b []byte) error {
	*r = append((*r)[:0], b...)
	return nil
}
