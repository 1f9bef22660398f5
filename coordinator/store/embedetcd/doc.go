// Package embedetcd runs an etcd member in this process (Start): alone,
// for a tenure that runs alone, or as one member of a cluster whose other
// members the other tenure nodes embed (InitialCluster). It owns what
// comes with a server and not with a client: the options and the cluster
// spec, the data dir's lock and checks, the peer checks before a quorum,
// the client's endpoint sync, and the filter that quiets etcd's logs.
//
// It is apart from etcdstore, as etcd keeps server/embed apart from its
// client, so that a store on external endpoints (and every package that
// imports etcdstore) does not link the etcd server. An Etcd hands out a
// client (Client) and the store options that match its raised limits
// (StoreOpts) for etcdstore.New.
package embedetcd
