package etcdfence_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-dev/tenure/epoch"
	"github.com/tenure-dev/tenure/epoch/etcdfence"
)

// A worker owning partition 7 at generation 4 writes its results through the
// fence. The partition moves to a new owner at generation 5, who writes too.
// Then the first worker wakes up from a long pause and tries to write again:
// the fence rejects it, and its write never lands.
func Example() {
	// endpoints are the etcd client URLs; in this example, those of the
	// test's embedded server.
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cli.Close()
	ctx := context.Background()

	fence := etcdfence.New(cli, "/example/orders")
	const result = "/example/orders/data/7"

	write := func(token epoch.Token, value string) {
		_, err := fence.Put(ctx, 7, token, clientv3.OpPut(result, value))
		var stale *epoch.StaleError
		switch {
		case errors.As(err, &stale):
			fmt.Printf("token %v rejected: partition %d is at token %v\n", token, stale.Partition, stale.Current)
		case err != nil:
			fmt.Println(err)
		default:
			fmt.Printf("token %v wrote %q\n", token, value)
		}
	}
	write(4, "first owner")
	write(5, "second owner")
	write(4, "zombie")

	resp, err := cli.Get(ctx, result)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s = %q\n", resp.Kvs[0].Key, resp.Kvs[0].Value)
	// Output:
	// token 4 wrote "first owner"
	// token 5 wrote "second owner"
	// token 4 rejected: partition 7 is at token 5
	// /example/orders/data/7 = "second owner"
}
