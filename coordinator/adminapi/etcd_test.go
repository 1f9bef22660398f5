package adminapi

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// TestEtcd: a node with an etcd names its client endpoints; one without
// (--store memory) says it has none, with code no_etcd.
func TestEtcd(t *testing.T) {
	ctx := context.Background()
	with := startNode(t, Etcd(EtcdInfo{Endpoints: []string{"http://127.0.0.1:40001"}, Embedded: true}))
	info, err := (&Client{Base: with.addr()}).Etcd(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(info.Endpoints, []string{"http://127.0.0.1:40001"}) || !info.Embedded {
		t.Errorf("got %+v", info)
	}

	without := startNode(t)
	_, err = (&Client{Base: without.addr()}).Etcd(ctx)
	var ae *Error
	if !errors.As(err, &ae) || ae.Code != "no_etcd" || ae.Status != 404 {
		t.Errorf("without an etcd: %v, want a 404 no_etcd", err)
	}
}
