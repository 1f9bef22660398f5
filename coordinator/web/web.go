// Package web is the coordinator's status page: a small web UI and the
// JSON API under it, served by `tenure serve --http` beside /metrics.
//
// The page lists the groups; for one group it draws a grid of its
// partitions coloured by owner with each token, the unowned ones
// highlighted, its members with their epoch and heartbeat age, and the
// group's generation log as a timeline, and it follows the group live
// through server-sent events (polling when those fail). It is plain HTML,
// CSS and JavaScript embedded in the binary: no build step, no framework,
// nothing fetched from elsewhere.
//
// Endpoints (docs/STATUS-PAGE.md has the JSON):
//
//	GET /                              the page
//	GET /static/{file}                 its script and style sheet
//	GET /api/groups                    this node and every group
//	GET /api/groups/{group}            one group (404 if it does not exist)
//	GET /api/groups/{group}/events     the same, pushed as server-sent events
//	GET /api/groups/{group}/log?limit=&before= the generation log, newest first
//	GET /api/keys                      the grant-signing keys (keys.go)
//
// Group and member names come from clients: the page only ever sets them
// as text, and every response forbids scripts from elsewhere (a
// Content-Security-Policy of 'self').
package web

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/server"
)

// Source is what the page reads. ServerSource adapts a *server.Server.
type Source interface {
	// Leadership says whether this node leads, and which node does.
	Leadership() server.Leadership
	// Groups lists the groups, sorted by name.
	Groups() ([]coordinator.GroupSummary, error)
	// GroupView describes one group; a missing group is
	// server.ErrGroupNotFound, and a node that does not lead answers
	// server.ErrNotLeading.
	GroupView(name string) (coordinator.GroupView, error)
	// GenerationLog returns at most limit entries of the group's
	// generation log, newest first, or ErrLogNotAvailable.
	GenerationLog(ctx context.Context, group string, before int32, limit int) ([]LogEntry, error)
}

//go:embed static
var static embed.FS

// Handler serves the page and its API. Create it with New; Close ends the
// event streams, which an http.Server's Shutdown would otherwise wait for.
type Handler struct {
	src  Source
	cfg  cfg
	mux  *http.ServeMux
	page []byte
	// streams counts the open event streams, up to cfg.maxStreams.
	streams   chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// New returns a Handler reading src.
func New(src Source, opts ...Opt) *Handler {
	c := defaultCfg()
	for _, o := range opts {
		o.apply(&c)
	}
	page, err := static.ReadFile("static/index.html")
	if err != nil {
		panic(fmt.Sprintf("web: the embedded page is missing: %v", err)) // a broken build
	}
	h := &Handler{src: src, cfg: c, mux: http.NewServeMux(), page: page,
		streams: make(chan struct{}, c.maxStreams), done: make(chan struct{})}
	files, _ := fs.Sub(static, "static")
	h.mux.HandleFunc("GET /{$}", h.index)
	h.mux.HandleFunc("GET /static/{file}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("file") == "index.html" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		http.ServeFileFS(w, r, files, r.PathValue("file"))
	})
	h.mux.HandleFunc("GET /api/groups", h.groups)
	h.mux.HandleFunc("GET /api/groups/{group}", h.group)
	h.mux.HandleFunc("GET /api/groups/{group}/events", h.events)
	h.mux.HandleFunc("GET /api/groups/{group}/log", h.log)
	h.mux.HandleFunc("GET /api/keys", h.keys)
	h.mux.HandleFunc("GET /api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint: "+r.URL.Path, nil)
	})
	return h
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	h.mux.ServeHTTP(w, r)
}

// Close ends every event stream, at once, and refuses new ones; the
// other endpoints keep answering. It is safe to call more than once.
func (h *Handler) Close() { h.closeOnce.Do(func() { close(h.done) }) }

func (h *Handler) index(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Write(h.page)
}

// Opt configures a Handler; see New.
type Opt interface{ apply(*cfg) }

type opt func(*cfg)

func (o opt) apply(c *cfg) { o(c) }

type cfg struct {
	log        *zap.Logger
	sample     time.Duration
	refresh    time.Duration
	maxStreams int
}

func defaultCfg() cfg {
	return cfg{log: zap.NewNop(), sample: 250 * time.Millisecond, refresh: time.Second, maxStreams: 64}
}

// Logger sets the logger, overriding the default of no logging.
func Logger(l *zap.Logger) Opt { return opt(func(c *cfg) { c.log = l }) }

// SampleInterval sets how often an event stream reads its group, and so
// how soon a change reaches the page, overriding the default 250 ms. An
// unchanged group is sent again only every RefreshInterval, for the
// heartbeat ages.
func SampleInterval(d time.Duration) Opt {
	return opt(func(c *cfg) {
		if d > 0 {
			c.sample = d
		}
	})
}

// RefreshInterval sets how often an event stream sends its group when
// nothing but heartbeat ages changed, overriding the default 1 s.
func RefreshInterval(d time.Duration) Opt {
	return opt(func(c *cfg) {
		if d > 0 {
			c.refresh = d
		}
	})
}

// MaxStreams bounds the event streams open at once, overriding the
// default 64; one more is answered 503 and the page polls instead. Each
// stream reads its group every SampleInterval, under the group's lock.
func MaxStreams(n int) Opt {
	return opt(func(c *cfg) {
		if n > 0 {
			c.maxStreams = n
		}
	})
}
