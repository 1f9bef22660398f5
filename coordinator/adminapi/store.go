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
	registerInfo(mux, "/api/store", info, info != nil,
		"no_store", "this node does not say where it keeps its state")
}

// Store returns where the node keeps its state.
func (c *Client) Store(ctx context.Context) (StoreInfo, error) {
	return getJSON[StoreInfo](ctx, c, "/api/store")
}
