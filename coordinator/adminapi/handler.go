package adminapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/server"
)

// Source is what the handler serves: *server.Server.
type Source interface {
	Drain(group, member string, remove bool) error
	Undrain(group, member string) error
}

// Opt configures Register.
type Opt interface{ apply(*cfg) }

type opt func(*cfg)

func (o opt) apply(c *cfg) { o(c) }

type cfg struct {
	log     *zap.Logger
	timeout time.Duration
	etcd    *EtcdInfo
	store   *StoreInfo
}

// DefaultForwardTimeout is how long a node waits for the leader's answer
// to a request it forwards.
const DefaultForwardTimeout = 10 * time.Second

// Logger sets the logger of forwarded requests, overriding the default of
// no logging (also what nil means).
func Logger(l *zap.Logger) Opt { return opt(func(c *cfg) { c.log = l }) }

// ForwardTimeout bounds a forwarded request, from the connection to the
// leader to the end of its answer, overriding the default 10 s
// (DefaultForwardTimeout, also what a duration that is not positive
// means).
func ForwardTimeout(d time.Duration) Opt { return opt(func(c *cfg) { c.timeout = d }) }

// Register adds the drain routes to mux, and the signing key routes
// (keys.go) if src is a KeySource. The log is the status page's
// (package web serves GET /api/groups/{group}/log with LogEntry).
//
// A node of an HA set that does not lead forwards a drain or undrain to
// the leader's HTTP listener (server.Node.HTTP) once, marked with
// ForwardedHeader, and passes the leader's answer on; it answers 421
// not_coordinator itself when the leader has no HTTP listener, when no
// node leads, and when the request was forwarded to it already.
func Register(mux *http.ServeMux, src Source, opts ...Opt) {
	c := cfg{log: zap.NewNop(), timeout: DefaultForwardTimeout}
	for _, o := range opts {
		o.apply(&c)
	}
	if c.log == nil {
		c.log = zap.NewNop()
	}
	if c.timeout <= 0 {
		c.timeout = DefaultForwardTimeout
	}
	h := &handler{fwd: newForwarder(c)}
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
		h.change(w, r, func() error { return src.Drain(r.PathValue("group"), r.PathValue("member"), remove) },
			map[string]bool{"drained": true, "remove": remove})
	})
	mux.HandleFunc("POST /api/groups/{group}/members/{member}/undrain", func(w http.ResponseWriter, r *http.Request) {
		h.change(w, r, func() error { return src.Undrain(r.PathValue("group"), r.PathValue("member")) },
			map[string]bool{"drained": false})
	})
	if ks, ok := src.(KeySource); ok {
		registerKeys(mux, ks)
	}
	registerEtcd(mux, c.etcd)
	registerStore(mux, c.store)
}

type handler struct{ fwd *forwarder }

// change answers ok once do succeeds; what only the leader can do goes to
// the leader when this node does not lead.
func (h *handler) change(w http.ResponseWriter, r *http.Request, do func() error, ok any) {
	err := do()
	if err == nil {
		writeJSON(w, http.StatusOK, ok)
		return
	}
	var nc *server.NotCoordinatorError
	if errors.As(err, &nc) && nc.HasLeader && nc.Leader.HTTP != "" && !forwarded(r) {
		h.fwd.forward(w, r, nc.Leader)
		return
	}
	writeErr(w, r, err)
}

// apiError is the body of an error response.
type apiError struct {
	Error  string `json:"error"`
	Code   string `json:"code"`
	Leader string `json:"leader,omitempty"`
}

func writeErr(w http.ResponseWriter, r *http.Request, err error) {
	var nc *server.NotCoordinatorError
	switch {
	case errors.As(err, &nc):
		leader, msg := "", err.Error()
		if nc.HasLeader {
			leader = nc.Leader.Addr
			switch {
			case forwarded(r):
				msg += "; the request was forwarded here by another node, and is not forwarded twice: leadership is moving, retry"
			case nc.Leader.HTTP == "":
				msg += ", but serves no admin API (it runs without --http), so the request cannot be forwarded to it: give every node of the HA set --http"
			}
		}
		writeError(w, http.StatusMisdirectedRequest, "not_coordinator", msg, leader)
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

// registerInfo answers GET path with what the node said of itself (info),
// or 404 with code and msg where it has nothing to say (has false).
func registerInfo[T any](mux *http.ServeMux, path string, info *T, has bool, code, msg string) {
	mux.HandleFunc("GET "+path, func(w http.ResponseWriter, r *http.Request) {
		if !has {
			writeError(w, http.StatusNotFound, code, msg, "")
			return
		}
		writeJSON(w, http.StatusOK, info)
	})
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
