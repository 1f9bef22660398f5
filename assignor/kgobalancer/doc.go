// Package kgobalancer adapts tenure's assignors to franz-go's
// kgo.GroupBalancer, so that kgo consumers in a classic consumer group
// (JoinGroup/SyncGroup, on Kafka or on tenure) balance with them: Uniform
// and Rendezvous, both cooperative (incremental rebalancing, KIP-429).
//
// It lives beside the client it adapts to, apart from package assignor,
// which is pure and which the coordinator's core imports: the core does not
// link the Kafka client.
package kgobalancer
