// Package ha makes several tenure processes on one etcd cluster an HA set:
// each registers as a node, they elect one leader through etcd, and the
// leader coordinates every group for as long as its term is valid. The
// others answer clients with NOT_COORDINATOR and point them at the leader
// (Node.Leader).
//
// Join registers a node; Node.Terms delivers each leadership term the node
// wins. A Term says whether the node may still act as leader (Term.Valid,
// a clock check cheap enough for every request), when it stops (Term.Done),
// and gives the comparison that makes a store write land only during the
// term (Term.Guard, for etcdstore.Guard). Node.Changed announces every
// change of the node's view (registrations, candidacies, shard owners) to
// any number of watchers, such as the server's view of live nodes. A
// leader stopped on purpose calls Node.Leave: it deregisters, resigns and
// waits for another node to lead, so the set changes hands at once rather
// than after an election TTL (with Shards, Leave hands each shard on).
//
// # Keys
//
// Under the etcd store's prefix <p> (default "/tenure/"), in <p>meta/ha/,
// which the store's loads skip:
//
//	<p>meta/ha/nodes/<id>          {"id":<id>,"addr":"host:port","http":"host:port"}, bound to the node's lease
//	<p>meta/ha/leader/<lease hex>  the node ID in decimal, bound to the same lease
//	<p>meta/ha/addrs/<addr>        the node ID the address last had (no lease)
//	<p>meta/ha/shards/<s>          shard s's owner (Shards above 1; see Shards below)
//
// "http", the node's HTTP listener (HTTPAddr), is absent when it has none.
//
// A node's ID is claimed with Txn(If CreateRevision(key) = 0 Then Put(key,
// WithLease)), so a dead node's ID is free again once its lease expires. IDs
// stick to addresses, as a Kafka broker keeps its ID: clients map broker IDs
// to addresses, and an ID that moved to another address would send them
// to the wrong node. So a node that joins claims the ID its address had
// (after a kill -9 it waits, up to two TTLs, for its previous incarnation's
// lease to expire), and otherwise the lowest integer that no live node
// holds and no other address had. A node that replaces its lease claims
// its old ID again if it is still free (or still bound to its old lease).
//
// The leader/ keys are the candidates, in the layout of etcd's
// concurrency.Election (so `etcdctl elect --listen <p>meta/ha/leader`
// shows the leader): the candidate whose key has the lowest create
// revision is the leader, and that create revision identifies its term
// (Term.Revision).
//
// # Why a valid term is safe
//
// At most one node's term is valid at any instant, and a deposed leader's
// guarded writes never land:
//
//  1. A node starts a term only once every candidate key created before
//     its own is deleted and a linearizable read shows its key first.
//     etcd never brings a key back with an old create revision, so no
//     other node can pass that check until this key is deleted.
//  2. The key lives as long as the node's lease, unless the node resigns
//     (which ends its term before deleting the key). The etcd leader
//     expires a lease TTL after it last renewed it, on its own clock
//     (lessor.Renew: expiry = now + TTL), and a renewal that reaches an
//     expired lease fails. Renewals are not replicated: a new etcd leader
//     starts every lease afresh at TTL plus an election timeout when it
//     takes over (lessor.Promote). An etcd leader cut off from its quorum
//     goes on acknowledging renewals while its raft loop ticks
//     (EtcdServer.ensureLeadership trusts a leader that ticked within three
//     ticks) until CheckQuorum deposes it, at most two election timeouts
//     after the cut; its successor is elected at least an election timeout
//     after the last heartbeat it received, and restarts the leases an
//     election timeout later still. So whichever etcd leader acknowledged a
//     renewal received at r, the lease lives until at least TTL after r,
//     less one etcd heartbeat interval (100 ms by default).
//  3. A node renews its lease with its own loop, KeepAliveOnce every TTL/6,
//     and counts from the send time s of the last acknowledged renewal,
//     read from its monotonic clock before the request left: etcd received
//     it after s. With the clocks' rates within MaxDrift, etcd's TTL after
//     receipt lasts at least TTL×(1−MaxDrift) on the node's clock, so the
//     key exists until at least s + TTL×(1−MaxDrift) − the heartbeat
//     interval. A term is valid only before s + TTL×(1−MaxDrift) − Margin
//     (epoch.Window: the member's arithmetic, with the lease in place of
//     the session), which is earlier as long as Margin exceeds the etcd
//     heartbeat interval. The default does: TTL/10 is 200 ms or more from
//     a TTL of 2 s, and etcd grants no lease shorter than 1.5 election
//     timeouts (2 s at its defaults) while the window counts the TTL
//     asked. It follows
//     that when etcd loses its quorum, a leader's term ends at most
//     TTL×(1−MaxDrift) − Margin plus two etcd election timeouts later.
//  4. So a term is invalid before its key can be deleted by expiry, and a
//     successor's term starts only after that deletion: valid intervals of
//     different terms never overlap. Revisions grow with the terms.
//
// When the deadline passes (renewals failing: etcd lost its quorum, the
// node is cut off, or it was paused) the term ends at once (Done closes;
// reason in_doubt), and the node recovers: it revokes its lease if it can,
// takes a new one, registers again and campaigns again, backing off while
// etcd is unreachable. The deadline of a lease never moves once it has
// passed, so a term that was invalid never becomes valid again, and a term
// is never handed out with its deadline passed.
//
// A process paused past its deadline (SIGSTOP, a long GC) finds its term
// invalid the instant it runs again, because the monotonic clock ran on.
// What no clock check can cover is a Valid check made before the pause and
// acted on after it; that is what Guard is for: etcd evaluates
// CreateRevision(leader key) = Revision when it applies the write, and
// once the key is deleted that comparison never holds again (a new key
// has a new revision), so the deposed leader's write changes nothing. The
// same holds when the bounds are broken: a clock that stops while etcd's
// runs (a suspended virtual machine: Linux's monotonic clock does not
// count suspend) or drifts beyond MaxDrift, or an operator deleting the
// leader key (the node notices through its watch and ends the term,
// reason deposed, but only as fast as the watch delivers). Then replies
// served from the leader's memory may be stale, and guarded writes still
// are not.
//
// Node.Leader and Node.Nodes come from a watch of <p>meta/ha/ and may lag;
// they are advice for redirecting clients, never used for safety.
//
// # Shards
//
// With Shards(n), n > 1, there is no leader: groups hash onto n shards
// (ShardOf: xxhash of the name modulo n) and each shard has an owner of
// its own, under the key
//
//	<p>meta/ha/shards/<s>          the owner's node ID, bound to its lease
//
// A node holds a term of every shard whose key it created (ShardTerms),
// and such a term is exactly as safe as a leadership term: the key lives
// with the node's lease, the term is valid only before the lease's
// deadline, and Guard compares the key's create revision. The argument
// above holds shard by shard, with "the key is created" in place of "the
// key is first".
//
// Who should own what is computed, not negotiated: every node runs the
// same placement over what the watch shows (the live nodes and the owner
// keys), tenure's own rule for partitions applied to itself: each node
// gets floor or ceil of n over the nodes, the larger quotas going to the
// nodes that hold the most, and each keeps what it holds up to its quota,
// so a node that joins or leaves moves the fewest shards. A node takes a
// shard (create if absent) only when the placement gives it a shard that
// has no key; it gives one up when the placement sends it elsewhere: it
// ends the term (the server stops serving the shard at once), waits for
// the server's Release (its groups dropped, its writes settled, at most
// a TTL), and only then deletes the key. So a shard is always released
// before its next owner can take it. Views that lag only delay this:
// two nodes that both believe a free shard is theirs race on the create,
// and one wins. A node that dies keeps its keys until its lease expires;
// then the others take its shards, and only its shards. The count is
// recorded at <p>meta/shards when the prefix is first used, and a node
// with another count is refused (ErrShardCount), since two counts would
// give one group two owners.
//
// # Why not concurrency.Session and concurrency.Election
//
// concurrency.NewSession with WithLease(id) keeps the given lease alive
// itself (client.KeepAlive, a renewal every TTL/3 on a shared stream),
// acknowledging nothing the caller can time; and Election.Campaign, when
// its context ends, resigns with the client's context, which can block
// until the client closes while etcd is unreachable. The node's own loop
// needs the send time of every renewal, and Close must not hang, so the
// node campaigns with the same few operations Election uses (put if
// absent, wait for the predecessor's deletion, read the first key).
//
// # Metrics
//
// With Registerer:
//
//	tenure_leader                        gauge: 1 while this node holds a term that has not ended
//	tenure_leader_terms_total            counter: terms this node won
//	tenure_leader_lost_total             counter by reason: in_doubt, lease_lost, deposed, resigned, closed
//	tenure_ha_keepalive_failures_total   counter: failed lease renewals
//	tenure_ha_nodes                      gauge: live nodes, as the watch sees them
//	tenure_shards                        gauge: the shard count (1: one leader)
//	tenure_shards_led                    gauge: shard terms held now (Shards above 1)
//	tenure_shard_terms_total             counter: shard terms started
//	tenure_shard_lost_total              counter by reason: moved, in_doubt, lease_lost, deposed, closed
package ha
