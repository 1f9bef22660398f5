package ha_test

import (
	"context"
	"log"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-dev/tenure/coordinator/ha"
	"github.com/tenure-dev/tenure/coordinator/store/etcdstore"
)

// A tenure process joins the HA set and, for each term it wins, opens the
// store guarded by the term: the store takes the fence over, so the
// previous leader's store writes nothing more, and every write of this
// term lands only while its leader key exists. While the term is valid it
// serves; when it ends it stops, and waits for the next. A process that
// is not the leader redirects clients to node.Leader().
func Example() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://127.0.0.1:2379"}})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()
	node, err := ha.Join(ctx, cli, "tenure-0.example:9092")
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close()

	for term := range node.Terms() {
		store, err := etcdstore.New(ctx, cli, etcdstore.Guard(term.Guard()))
		if err != nil {
			term.Resign(ctx) // let another node try
			continue
		}
		if _, err := store.Load(ctx); err != nil { // restore the groups from the records
			store.Close()
			term.Resign(ctx)
			continue
		}
		// Serve: before each reply, term.Valid(time.Now()), else answer
		// NOT_COORDINATOR.
		_ = term.Valid(time.Now())
		<-term.Done()
		store.Close()
	}
}
