package adminapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/server"
)

// Source is what the handler serves: *server.Server.
type Source interface {
	Drain(group, member string, remove bool) error
	Undrain(group, member string) error
}

// Register adds the drain routes to mux. The log is the status page's
// (package web serves GET /api/groups/{group}/log with LogEntry).
func Register(mux *http.ServeMux, src Source) {
	mux.HandleFunc("POST /api/groups/{group}/members/{member}/drain", func(w http.ResponseWriter, r *http.Request) {
		remove := false
		if v := r.URL.Query().Get("remove"); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				writeError(w, http.StatusBadRequest, "bad_request", "remove must be true or false", "")
				return
			}
			remove = b
		}
		if err := src.Drain(r.PathValue("group"), r.PathValue("member"), remove); err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]bool{"drained": true, "remove": remove})
	})
	mux.HandleFunc("POST /api/groups/{group}/members/{member}/undrain", func(w http.ResponseWriter, r *http.Request) {
		if err := src.Undrain(r.PathValue("group"), r.PathValue("member")); err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]bool{"drained": false})
	})
}

// apiError is the body of an error response.
type apiError struct {
	Error  string `json:"error"`
	Code   string `json:"code"`
	Leader string `json:"leader,omitempty"`
}

func writeErr(w http.ResponseWriter, err error) {
	var nc *server.NotCoordinatorError
	switch {
	case errors.As(err, &nc):
		leader := ""
		if nc.HasLeader {
			leader = nc.Leader.Addr
		}
		writeError(w, http.StatusMisdirectedRequest, "not_coordinator", err.Error(), leader)
	case errors.Is(err, server.ErrUnknownGroup):
		writeError(w, http.StatusNotFound, "unknown_group", err.Error(), "")
	case errors.Is(err, coordinator.ErrUnknownMember):
		writeError(w, http.StatusNotFound, "unknown_member", err.Error(), "")
	case errors.Is(err, coordinator.ErrNotDrainable), errors.Is(err, coordinator.ErrGroupIsDeleted):
		writeError(w, http.StatusConflict, "not_drainable", err.Error(), "")
	default:
		writeError(w, http.StatusServiceUnavailable, "unavailable", err.Error(), "")
	}
}

func writeError(w http.ResponseWriter, status int, code, msg, leader string) {
	writeJSON(w, status, apiError{Error: msg, Code: code, Leader: leader})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // the client went away
}
