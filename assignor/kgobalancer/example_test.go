package kgobalancer_test

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tenure-dev/tenure/assignor/kgobalancer"
)

// A franz-go consumer in a classic consumer group, balanced by Uniform. The
// group's leader runs the balancer; all members must offer it.
func ExampleUniform() {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers("localhost:9092"),
		kgo.ConsumerGroup("workers"),
		kgo.ConsumeTopics("events"),
		kgo.Balancers(kgobalancer.Uniform()),
	)
	if err != nil {
		panic(err)
	}
	defer cl.Close()
}
