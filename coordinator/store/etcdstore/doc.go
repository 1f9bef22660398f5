// Package etcdstore is the durable store.Store of tenure: the latest record
// of every entity (a topic, a group, a member, a member's assignment, a
// committed offset) under one etcd key each, overwritten in place, so that
// it holds exactly what a coordinator.RecordSet holds. Offset writes are
// the exception: a transaction's offset writes of a group are one key, an
// offset batch (etcd's cost is per key), which a fold moves back into the
// partitions' keys every FoldEvery batches (up to 4 times as many for a
// group of many partitions a batch); a partition's offset is the
// write of the highest order (offset_batch.go, fold.go).
//
// New opens a store on any etcd cluster, through a client: the package
// does not link the etcd server; embedetcd runs an etcd member in this
// process and hands New its client. Topics is
// the fence-free topic registry that every node of an HA set shares, and
// Users the SASL users' SCRAM credentials, shared alike.
//
// A prefix may be split into shards (Shard): each shard's groups live in
// a directory of their own, behind a fence of their own, so that the
// stores of different shards, on one node or several, are open at once;
// topics, users, ACLs and the generation logs stay shared. The shard count
// is fixed once a prefix is used (ErrShardCount).
//
// Mirror follows a prefix's group records (of a sharded prefix, the
// shards given to Follow) from a node that does not write them, through a
// watch per shard, so that a warm standby takes a term over without a
// load (mirror.go).
//
// Persist writes a batch of records as a few transactions, in order, each
// guarded (Guard, for fail-over) and fenced, so that a write that fails
// with an unknown outcome cannot land after Persist returned (fence.go).
// Load and LoadGroup read the records back in load order with
// linearizable, paginated reads at one revision.
//
// docs/STORE.md describes the key layout, the value encoding, the sizes,
// compaction and the fence, for operators.
//
// Metrics, when a Registerer is given, shared by the stores open on it:
//
//	tenure_store_write_seconds   histogram: time of one write transaction
//	tenure_store_txn_records     histogram: records in one write transaction
//	tenure_store_txn_bytes       histogram: estimated bytes of one write transaction
//	tenure_store_errors_total    counter by op: persist, load, load_group, fence, fold
package etcdstore
