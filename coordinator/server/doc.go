// Package server is tenure's coordinator on the network: a TCP server that
// speaks the Kafka wire protocol around the group core (package
// coordinator), so that a stock Kafka consumer — franz-go's kgo with the
// classic cooperative-sticky protocol, or with KIP-848 through
// kgo.ServerSideBalancer() — joins a tenure group without knowing it is not
// talking to Kafka, and kadm administers it.
//
// # What it serves
//
// Topics are virtual work shards: they hold no records. A topic is created
// with DefaultPartitions (64) the first time a client asks for it in
// Metadata (unless AutoCreateTopics is off), or explicitly with
// CreateTopics; its partition count and ID never change. DeleteTopics
// deletes it with every group's offsets of it (a topic created again
// under the name is a new one). Fetch answers are empty, held for the
// request's MaxWaitMillis; ListOffsets answers 0.
//
// The group requests (JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
// ConsumerGroupHeartbeat, OffsetCommit, OffsetDelete) go to the group's
// core; OffsetFetch, DescribeGroups, ConsumerGroupDescribe, ListGroups and
// DeleteGroups are answered from the core's read methods. A client asking
// for an API or version the server does not serve is disconnected, as
// Kafka does, except that an ApiVersions too new is answered so the client
// can step down.
//
// # One file per API key
//
// Each API key the server serves is registered once, in its own file named
// after the key (11_join_group.go, 68_consumer_group_heartbeat.go...), as
// in kfake: its version range, its handler, how to answer one of its
// requests with an error, where its response carries its error code (for
// metrics), and whether its request may be decoded in place in the read
// buffer. apis.go builds the key-indexed table that the frame checks,
// dispatch, ApiVersions, error answers and metrics all read, so serving
// one more API touches one file.
//
// # Committing offsets
//
// Because topics hold no records, a consumer never consumes anything, and
// kgo's autocommit (which commits consumed positions) never fires. Members
// commit explicitly, for example
//
//	cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{
//		"jobs": {3: {Epoch: -1, Offset: 42}},
//	}, nil)
//
// and the coordinator checks the commit against the partition's current
// owner and fencing token.
//
// # Concurrency
//
// Each connection has a reader goroutine that reads, decodes and handles
// its requests in order, and a writer goroutine used only when a response
// is completed from elsewhere. Each group's core is owned by one goroutine
// at a time (its lock), so groups run in parallel.
//
// After every Step the server hands the Ready's records to the
// store writer (writer.go), which persists everything queued since its
// last write in one Store.Persist (group commit: one etcd transaction, one
// fsync, for the records of many Readies of many groups), while the groups
// keep stepping. A reply goes out once every write its group issued up to
// the reply's Ready is durable: at once when none is in flight, which is
// the common case of a heartbeat that changed nothing (reply.go); reads
// (OffsetFetch, DescribeGroups, ConsumerGroupDescribe) and DeleteGroups
// wait likewise (withgroup.go). Events are logged and counted (ready.go),
// and the group's single timer is re-armed for Ready.NextTick (timer.go).
//
// A failed write, or a panic in a group's core (a broken invariant: a
// bug; core.go), takes only that group offline (offline.go): its waiting
// replies, reads and parked requests are answered
// COORDINATOR_NOT_AVAILABLE, which clients retry, and its next request rebuilds the core from the store
// (coordinator.Restore) once none of its writes is in flight. At start-up
// Serve loads every topic and group from the store; a group deleted and
// re-created under the same name continues from its tombstone's epoch.

// # HA sets
//
// With Config.Cluster the server is one node of an HA set (package ha on
// etcd; `tenure serve` wires it): it serves Metadata (every live node) and
// FindCoordinator (the leader) at once, and coordinates the groups only
// during the terms it wins, each with its own guarded store from which it
// loads every group; group requests to a node that does not lead are
// answered NOT_COORDINATOR (COORDINATOR_NOT_AVAILABLE while no node
// leads), and a term in doubt stops answering them, and its replies, at
// once. Topics are shared through a TopicStore that any node may create
// in; only the leader deletes (the others answer NOT_CONTROLLER), and the
// other nodes drop a deleted topic at their next refresh (TopicRefresh).
//
// A Cluster that is a ShardedCluster spreads the groups over shards: the
// server then holds a term per shard it owns, each with the store of that
// shard's groups, and serves a group under the term of its shard
// (ShardOf); FindCoordinator names each group's shard owner, Metadata
// names shard 0's owner as the controller (which serves topic deletions),
// and ListGroups lists this node's groups. A shard term that ends drops
// its groups, settles their writes and calls Release, after which the
// cluster lets the shard's next owner take it.
//
// With Config.Standby (an etcdstore.Mirror) a node is a warm standby: it
// keeps every group it may take over rebuilt from the mirror
// (coordinator.Rebuild), and a term it wins syncs the mirror, resumes
// those groups and serves, without loading the store (standby.go). With
// shards, the mirror follows only the shards the cluster says this node
// may take next (ShardSuccession, ShardFollower).
//
// What survivors tell stock clients when a node dies for good (view.go,
// peers.go; docs/DESIGN.md has the measured story): each node probes the
// others' Kafka listeners every PeerProbe and lists in Metadata only the
// live ones, each departed node's broker ID for ten minutes at the address
// of the node that took its groups (clients cache their coordinator by
// broker ID), and partition leaders spread over the live nodes; each
// change answers Fetch NOT_LEADER_OR_FOLLOWER once per connection, so
// clients reload metadata; FindCoordinator is held up to CoordinatorWait
// while no live node coordinates the group; restored members get
// coordinator.Config.TakeoverGrace to reach the new coordinator.
//
// Responses on one connection always leave in request order, even when an
// earlier request is parked (a JoinGroup waiting for its rebalance, a
// Fetch held for MaxWait); requests on other connections never wait for
// it. A connection may have MaxInFlight requests pending; past that the
// server stops reading it until responses go out.
//
// # Limits
//
// Each limit is a Config field (and a flag of `tenure serve`):
//
//   - MaxFrameSize (4 MiB): a larger request closes its connection before
//     anything is allocated for it; so does a negative size, a truncated
//     header, an unknown API key, an unsupported version or an undecodable
//     body.
//   - MaxConnections (10,000): a connection beyond it is closed on accept.
//   - IdleTimeout (10 min): a connection silent that long with nothing
//     pending is closed. WriteTimeout (30 s): a connection whose client
//     does not read its responses is closed.
//   - Core.MaxGroupSize (10,000): a join beyond it is
//     GROUP_MAX_SIZE_REACHED (answered by the core).
//   - MaxPartitions (10,000): CreateTopics beyond it is INVALID_PARTITIONS.
//   - MaxTopics (10,000): a creation beyond it is POLICY_VIOLATION.
//   - MaxGroups (100,000): a request that would create one more group is
//     COORDINATOR_NOT_AVAILABLE, which clients retry, so they get in once
//     a group is deleted.
//   - MaxConnectionsPerIP (off): a connection from an IP holding that
//     many is closed on accept (connlimit.go).
//   - MaxParkedPerConnection (16), MaxParkedPerGroup (20,000): requests
//     parked (JoinGroup, SyncGroup, held Fetch) beyond them are answered
//     at once (slot.go).
//   - QuotaRequestRate, QuotaConnectionRequestRate (off): requests per
//     second of a principal and of a connection; a client over them is
//     throttled as Kafka throttles (quota.go).
//
// Every refusal is logged and counted in tenure_limit_rejections_total.
//
// # Listeners, TLS and SASL
//
// Serve serves one net.Listener per Config.Listeners entry, each with its
// security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) and
// advertised address; Metadata and FindCoordinator answer a client with
// the addresses of the listener it came in on. A connection authenticates
// once, before anything else (authn.go): at accept on PLAINTEXT, by its
// TLS handshake on SSL (its verified certificate's subject is its
// principal, as Kafka writes it), by SaslHandshake and SaslAuthenticate
// (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 on xdg-go/scram) on the SASL
// listeners, against the SCRAM credentials of Config.Credentials, which
// DescribeUserScramCredentials and AlterUserScramCredentials manage.
// Before that only ApiVersions and the SASL requests pass, each at most
// MaxAuthFrameSize bytes, and within AuthTimeout of the accept. LoadTLS
// reloads certificates when their files change. docs/SECURITY.md has the
// details.
//
// # Authorization
//
// With Config.Authorization every request is checked as Kafka checks it,
// for the connection's principal and host, against the ACL bindings of
// Config.ACLStore and the super users (authz.go; the decision is package
// acl's). The ACL APIs (DescribeAcls, CreateAcls, DeleteAcls) manage the
// bindings, which every node of an HA set shares. docs/SECURITY.md has
// the table of what each request needs.
//
// # Signed grants
//
// With Config.SignGrants every ownership a reply grants (the core names
// them) is signed with the active key of the store's key ring (Ed25519,
// over group, topic ID, partition, token and member) and carried in a
// tagged field of the flexible responses, which stock clients skip
// (signing.go, package epoch/grantwire). The member library hands the
// signature out with the claim's token, and fences with an
// epoch.Verifier of the published keys (SigningKeys) refuse tokens nobody
// issued. RotateKey (which publishes the next key for KeyPublishDelay
// before it signs), RotateKeyNow and RevokeKey change the ring, which
// every node of an HA set shares and follows. docs/SECURITY.md has the
// threat model.
//
// # Metrics
//
// With Config.Registerer set:
//
//	tenure_requests_total{api,error}          counter
//	tenure_heartbeat_duration_seconds{api}    histogram (Heartbeat, ConsumerGroupHeartbeat; frame read to response queued, waits included)
//	tenure_rebalances_total{type,reason}      counter (new generations: classic, consumer; why)
//	tenure_handoff_unowned_seconds            histogram (per moved partition: release to grant)
//	tenure_unowned_partitions                 gauge (summed over groups, read at scrape)
//	tenure_takeover_awaited_members           gauge (restored under the takeover grace, not heard from since)
//	tenure_peers_down                         gauge (registered nodes the probe finds down)
//	tenure_view_changes_total                 counter (changes of the set told to clients)
//	tenure_find_coordinator_held_total        counter (FindCoordinator held for a live coordinator)
//	tenure_connection_loss_settling_total     counter (closes that started no connection-loss grace: the view was settling)
//	tenure_group_generation{group}            gauge
//	tenure_group_members{group}               gauge
//	tenure_group_unowned_partitions{group}    gauge
//	tenure_commits_rejected_total             counter
//	tenure_members_expired_total{reason}      counter (session-timeout, connection-closed)
//	tenure_connections                        gauge
//	tenure_connections_closed_total{reason}   counter
//	tenure_limit_rejections_total{limit}      counter
//	tenure_groups                             gauge
//	tenure_topics                             gauge
//	tenure_store_failures_total               counter
//	tenure_store_persist_seconds              histogram (one batched write)
//	tenure_store_batch_records                histogram
//	tenure_store_batch_readies                histogram (writes served by one batch)
//	tenure_groups_offline_total{reason}       counter (store, panic)
//	tenure_group_reloads_total{result}        counter (reloaded, error)
//	tenure_group_panics_total                 counter
//	tenure_coordinating                       gauge (1 while this node coordinates the groups)
//	tenure_coordinator_terms_total            counter (terms served: loads of every group)
//	tenure_takeover_groups_total{from}        counter (groups a term started with: standby, mirror, store)
//	tenure_standby_shards                     gauge (shards the warm standby follows)
//	tenure_takeover_waits_total{outcome}      counter (requests that waited for a load or install: served, timeout)
//	tenure_authentications_total{mechanism,result} counter (SASL: ok, failed; none/refused)
//	tenure_authorization_denied_total{api}    counter (authorization refusals)
//	tenure_acls                               gauge (ACL bindings in force)
//	tenure_throttled_requests_total{quota}    counter (principal, connection)
//	tenure_throttle_seconds_total             counter (throttle time given)
//	tenure_grants_signed_total                counter (partitions granted in signed replies)
//	tenure_signing_key_changes_total          counter (this node started signing with another key)
//
// The three per-group gauges add one series per group each and disappear
// with the group; turn them off with Config.PerGroupMetrics = false on a
// server holding more than a few thousand groups. Every other metric has a
// bounded label set.
package server
