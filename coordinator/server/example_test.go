package server_test

import (
	"context"
	"fmt"
	"net"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tenure-dev/tenure/coordinator/server"
	"github.com/tenure-dev/tenure/coordinator/store"
)

// A tenure server is administered like a Kafka cluster: here kadm creates
// a virtual topic of 8 partitions and finds the group coordinator.
func Example() {
	cfg := server.DefaultConfig()
	cfg.Store = store.NewMemory()
	srv, err := server.New(cfg)
	if err != nil {
		panic(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error)
	go func() { served <- srv.Serve(ctx, ln) }()

	cl, err := kgo.NewClient(kgo.SeedBrokers(ln.Addr().String()))
	if err != nil {
		panic(err)
	}
	adm := kadm.NewClient(cl)
	created, err := adm.CreateTopics(ctx, 8, 1, nil, "jobs")
	if err != nil {
		panic(err)
	}
	fmt.Println(created["jobs"].Topic, created["jobs"].NumPartitions, created["jobs"].Err)
	coord := adm.FindGroupCoordinators(ctx, "workers")["workers"]
	fmt.Println("coordinator of workers: node", coord.NodeID)

	cl.Close()
	stop() // graceful shutdown: Serve answers what is in flight and returns
	fmt.Println("serve returned", <-served)
	// Output:
	// jobs 8 <nil>
	// coordinator of workers: node 0
	// serve returned <nil>
}
