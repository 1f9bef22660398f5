package adminapi

import (
	"context"
	"net/http"
)

// StoreInfo is what GET /api/store answers: where the node keeps its
// groups' state. `tenure groups describe` asks it, so that a group of a
// --store memory coordinator is shown with what that means for its tokens
// (they start again from 1 after a restart), which the Kafka protocol has
// no way to say.
type StoreInfo struct {
	// Kind is "memory" (tenure serve --store memory) or "etcd".
	Kind string `json:"kind"`
	// Listeners are the Kafka addresses clients are told to reach the
	// node at, so that a client can tell whether the node it describes a
	// group on is this one.
	Listeners []string `json:"listeners"`
}

// Store makes GET /api/store answer info; without it the route answers
// 404 with code no_store.
func Store(info StoreInfo) Opt { return opt(func(c *cfg) { c.store = &info }) }

func registerStore(mux *http.ServeMux, info *StoreInfo) {
	mux.HandleFunc("GET /api/store", func(w http.ResponseWriter, r *http.Request) {
		if info == nil {
			writeError(w, http.StatusNotFound, "no_store", "this node does not say where it keeps its state", "")
			return
		}
		writeJSON(w, http.StatusOK, info)
	})
}

// Store returns where the node keeps its state.
func (c *Client) Store(ctx context.Context) (StoreInfo, error) {
	var out StoreInfo
	err := c.do(ctx, http.MethodGet, "/api/store", &out)
	return out, err
}
