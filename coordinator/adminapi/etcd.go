package adminapi

import (
	"context"
	"net/http"
)

// EtcdInfo is what GET /api/etcd answers: the client endpoints of the
// etcd the node keeps its state in (the embedded one's, or
// --etcd-endpoints). Demo workers write their records there when they are
// given no etcd of their own (tenure worker --resource etcd), so that
// `make run` and a worker on its defaults work together although the
// embedded etcd listens on a port the kernel chose.
type EtcdInfo struct {
	Endpoints []string `json:"endpoints"`
	// Embedded is true for the node's embedded etcd.
	Embedded bool `json:"embedded"`
}

// Etcd makes GET /api/etcd answer info; without it (a node with no etcd,
// --store memory) the route answers 404 with code no_etcd.
func Etcd(info EtcdInfo) Opt { return opt(func(c *cfg) { c.etcd = &info }) }

func registerEtcd(mux *http.ServeMux, info *EtcdInfo) {
	registerInfo(mux, "/api/etcd", info, info != nil && len(info.Endpoints) > 0,
		"no_etcd", "this node keeps its state in no etcd (tenure serve --store memory)")
}

// Etcd returns the client endpoints of the node's etcd; an *Error with
// code no_etcd if it has none.
func (c *Client) Etcd(ctx context.Context) (EtcdInfo, error) {
	return getJSON[EtcdInfo](ctx, c, "/api/etcd")
}
