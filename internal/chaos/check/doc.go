// Package check is the chaos suite's checker: after a run of real tenure
// nodes, workers and kgo consumers under faults, it decides from what the
// run left behind whether tenure kept its guarantees, and measures how
// quickly ownership came back after each fault.
//
// It is independent of the code under test. It trusts what the fenced
// resources hold (Rows), what the writers logged they attempted and saw
// (Attempts), what the consumers logged (Offsets), and the coordinator's
// persisted history: every revision of its etcd keys (History), decoded
// with etcdstore.Decode and etcdstore.DeletedRecord, the store's own
// codec, and nothing else of the coordinator. It never asks the
// coordinator or a worker what it thinks happened.
//
// # Run folder
//
// [Load] reads, and [Write] writes, a folder of:
//
//	run.json        Run: {"seed":7,"group":"chaos","topic":"jobs","partitions":16,
//	                "prefix":"/tenure/","session_timeout":"6s","rebalance_timeout":"10s",
//	                "faults":[{"kind":"kill","target":"w3","start":"<RFC3339Nano>","end":"..."}]}
//	                (a fault's "end" is when it healed; absent if it never did)
//	attempts/*.jsonl  the workers' attempt logs, one Attempt a line:
//	                {"t0":"...","t1":"...","op":"append","worker":"w3","member":"<id>",
//	                "partition":5,"token":12,"seq":40,"resource":"postgres","outcome":"ok",
//	                "err":"","held":false}; op is append (seq), admit, commit or fetch
//	                (offset, resource "coordinator"), claim (with "t" only), or
//	                forge (seq, "cause": the kind of forgery);
//	                outcome ok, stale, unverified or error (unknown), or pending: a commit's line
//	                written before it is sent, ended by a line of the same
//	                worker, member, partition, offset and t0 with its outcome;
//	                left pending (a killed worker), it is of unknown outcome;
//	                unknown fields are ignored
//	rows.jsonl      Row: {"resource":"etcd","partition":5,"seq":40,"token":12,
//	                "worker":"w3","member":"<id>","order":1234}; order is the
//	                resource's acceptance order (PostgreSQL id, etcd mod revision)
//	history.jsonl   KV: {"rev":812,"key":"<base64>","value":"<base64>","deleted":false},
//	                every revision of every key under <prefix>groups/ (or, sharded,
//	                <prefix>shards/<s>/groups/), in revision order (an etcd Watch
//	                from revision 1 on an uncompacted etcd)
//	revtimes.jsonl  RevTime: {"rev":812,"t":"..."}, etcd's current revision sampled
//	                about every 100 ms for the whole run
//	offsets.jsonl   OffsetOp: {"client":"c1","member":"<id>","partition":5,
//	                "kind":"commit","offset":41,"t0":"...","t1":"...","outcome":"ok",
//	                "err":""}; outcome ok, error (unknown), refused (an error code:
//	                nothing written), or pending (as in attempts, matched by client:
//	                a consumer learns its member ID with the answer); "group" if
//	                not run.json's
//	callbacks.jsonl Callback (optional): {"client":"c2","group":"chaos-classic",
//	                "member":"<id>","epoch":3,"callback":"revoked","partition":5,"t":"..."},
//	                one line per partition of each call of a stock consumer's
//	                OnPartitionsAssigned, OnPartitionsRevoked or OnPartitionsLost
//
// All times are wall-clock times of one machine: check 1's attempt part,
// check 5 and check 8 compare times logged by different processes. Run on
// several machines, their clocks' skew must be far below the operations'
// durations.
//
// [WriteJSONL] writes a .jsonl file, for runners that stream them. A worker
// killed with SIGKILL may leave a torn last line in its log: [Load] skips
// it with a note.
//
// # Checks
//
// [Check] returns a [Report]: every [Violation] with its [Kind], partition
// and evidence (times, revisions, acceptance orders), the [Stats], and
// notes on what limited the checks. Safety:
//
//  1. TokenOrder. Per resource and partition, in acceptance order, no
//     row's token is below a token accepted before it. And from the
//     attempt logs: no append acknowledged ok was called after the
//     resource had acknowledged (to anyone) a higher token for the
//     partition, by an admit or an append. Limit: a write of unknown
//     outcome is seen only through its row.
//  2. Unauthorised. Every row's, and every acknowledged admit's,
//     (partition, member, token) was held in the coordinator's history.
//     The history is replayed in revision order into ownerships: a
//     member's holding of a partition of Run.Topic in Run.Group from the
//     AssignmentRecord that first lists it in Owned (revoking partitions
//     are in Owned) to the revision at which its AssignmentRecord drops
//     it, its MemberRecord is deleted or the group is tombstoned, with
//     every token it had meanwhile (a provisional token follows the
//     member epoch, then is fixed at the reported epoch). A row that
//     names no member is checked against the members its worker's
//     attempts named. The check is about the grant, not its timing: a
//     zombie's write that lands after its ownership ended is allowed here
//     (check 1 decides whether a higher token was accepted before it),
//     because the resources' acceptance orders cannot be placed on etcd's
//     revisions. The replay checks two properties of the coordinator too:
//     TwoOwners, no partition held by two members at the end of a
//     revision (one transaction may hand a partition over in any key
//     order); and, for KIP-848 groups, GrantOrder, every token a member
//     holds a partition at is above every token of the partition's
//     earlier ownerships (classic static members legitimately keep their
//     predecessor's tokens).
//  3. LostWrite. Every append acknowledged ok has its row in that
//     resource (partition, seq, token, and the same member, or worker if
//     the row names no member). Acknowledged commits are check 5's.
//  4. SeqGap. The sequence numbers of the rows of one (resource,
//     partition, token, member) form a contiguous range; duplicates are
//     allowed (a record redone after a restart at an older commit).
//  5. NotLinearizable. Per partition, the committed offset is a register:
//     the workers' commits (attempt logs) and the consumers' (Offsets) are
//     writes, their fetches reads, over their real-time intervals, checked
//     with porcupine. A refused commit wrote nothing and a failed fetch
//     read nothing: both are left out. (A consumer's commit refused with
//     COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, REQUEST_TIMED_OUT or
//     COORDINATOR_LOAD_IN_PROGRESS in Err counts as unknown instead: a
//     coordinator whose store write failed answers so, and that write
//     may have landed. The runner should log those as "error".) A commit of unknown outcome may
//     take effect at any time after its call, or never: it returns after
//     every other operation; one whose value no fetch returned, or called
//     after every fetch returned, is left out as it cannot explain any
//     fetch. The register starts at -1 (no offset), which also reads as
//     0 (a client may clamp it). A search beyond
//     Options.LinearizabilityTimeout is "Unknown", with a note. An illegal
//     partition's visualisation goes to Options.OutDir. Limits: offset
//     deletions (a deleted group) are not modelled; the commits of one
//     request are checked partition by partition, not as one atomic
//     write.
//  6. EpochRegression. Every group's epoch (its GroupRecord's revisions,
//     the tombstone's included) never decreases.
//  7. OffsetRegression. In revision order, a partition's OffsetRecord
//     with an offset below the previous one was committed by a member
//     that could commit the partition at the record's token: it held it
//     at that token in that revision, or was its last owner at that token
//     with nobody given it since (the hand-off commit). A deletion resets
//     the partition.
//
// Liveness:
//
//  8. NoOwner. While no fault is active, no partition of Run.Topic is
//     without an owner in the coordinator's history for longer than the
//     bound, session timeout + rebalance timeout + Options.Slack
//     (DefaultSlack, 6 s: the HA election TTL, 5 s by default, as a
//     fail-over restarts every session at the new leader's restore; plus
//     a heartbeat interval and the RevTimes sampling). A partition still
//     unowned when the observation ends, in a quiet stretch shorter than
//     the bound, is a violation too: the runner must keep observing for
//     the bound after the last heal, and stop sampling RevTimes before
//     it stops its workers (members leaving would read as partitions
//     without an owner). Before a partition's first owner
//     the clock starts at the group's first record in the history, not
//     at the first RevTimes sample (the runner may sample while it starts
//     its processes). Revisions are placed at the first
//     RevTimes sample that reached them, up to ~100 ms late. Limit: the
//     history shows the coordinator's view, so a dead member counts as an
//     owner until its session expires; the recovery times measure that
//     expiry as well.
//
// The stock consumers' groups (Run.ConsumerGroups) are replayed too, for
// TwoOwners and, KIP-848, GrantOrder of their own.
//
// The forging variant (signed grants, verifying resources, one client
// forging tokens):
//
//  9. ForgedAccepted and HonestRefused. No forge attempt (op "forge",
//     cause the kind of forgery) was answered ok, and no row has a
//     negative sequence number (a forged record that landed, its attempt
//     of unknown outcome or not); no honest append or admit was refused
//     as unverified (outcome "unverified"). Without a forging client
//     there is nothing to see.
//
// The fail-over variant (Run.Unnoticed: every fault is one stock
// consumers must not notice):
//
//  10. Noticed, ClientTwoOwners and Expelled. No OnPartitionsRevoked or
//     OnPartitionsLost of a stock consumer (Callbacks) from the first
//     fault's start to the end of the observation; replaying the
//     callbacks in time, no partition assigned to a consumer while
//     another of its group holds it; no MemberRecord of a consumers'
//     group deleted at a revision the observation saw (the consumers
//     leave after it). Limit: the callbacks are stamped by the consumers'
//     own clocks, on one machine.
//
// Stats: faults by kind; appends (accepted, stale, unknown, held by a
// pause) and admits per resource; commits and fetches of the workers and
// consumers; partition-time without an owner (from the group's first
// record) before and after the group first had every partition owned; per fault, when the last partition
// that lost its owner between the fault's start and its deadline (or the
// next fault) had one again; porcupine's result per partition; the
// forgeries by kind and outcome.
//
// What no check can see: writes the resources accepted but lost (a row
// missing without an acknowledged attempt); appends whose attempt-log line
// was never written (a worker killed between the write and the log); the
// coordinator's replies that were never persisted (they would contradict
// its durability rule, but only the clients' logs show them, and only
// offsets are checked against those).
package check
