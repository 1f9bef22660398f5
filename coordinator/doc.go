// Package coordinator is tenure's group coordinator core: the state machine
// that decides who owns which partition, at which generation, and which
// commits to accept.
//
// A [Group] is pure. The caller hands it every input with the current time
// through [Group.Step]: decoded Kafka requests (franz-go's kmsg types, in a
// [Request]), a [Tick] when timers are due, topic changes and admin
// operations ([Input] lists them); then it performs what [Group.Ready]
// asks, in order: persist the records, send the replies, arm a timer for
// NextTick. The group never reads a clock, starts a goroutine or touches a
// socket, so the TCP server (package coordinator/server), the simulator
// (package sim) and the tests all run this same code.
//
// # Protocols
//
// Classic groups speak JoinGroup/SyncGroup/Heartbeat/LeaveGroup: the
// coordinator runs the rebalance barrier (with the initial rebalance delay,
// rebalance and session timeouts, static membership and protocol vote) and
// the leader member computes the plan. Consumer groups speak KIP-848's
// ConsumerGroupHeartbeat: the coordinator computes the target assignment
// with an assignor from package assignor and reconciles every member
// towards it, revoking a partition from its previous owner before giving it
// to the next one. A group is of one type at a time; an empty group changes
// type when a member of the other protocol joins.
//
// # Tokens
//
// One counter per group serves as the classic generation and the KIP-848
// group epoch, and it never decreases, not even when the group empties or
// changes type. When a partition is given to a member, the current epoch
// becomes its fencing token (an [epoch.Token]); the member keeps that token
// for as long as it keeps the partition, and the next owner gets a strictly
// higher one. In consumer groups the token is provisional until the member
// first reports the partition in a heartbeat, and is then fixed at that
// heartbeat's epoch, which is the epoch of the response the member acted
// on: so the member and the coordinator agree on it even when responses are
// lost (consumer_tokens.go). The coordinator's view of owners never holds two owners for a
// partition: giving away a partition that someone still holds panics, as a
// broken invariant.
//
// # Connection-aware expiry
//
// A dead process's kernel closes its connections; a paused or partitioned
// process closes nothing. The caller tells a group, with
// [ConnectionClosed], when the connection that carried a member's
// latest request ends; unless the member is heard from on any connection
// within [Config.ConnLossGrace] (3 s by default; 0 turns it off), the Tick
// at the end of the grace expels it as a session expiry would, with the
// reason "connection-closed" (EventMemberExpired, the epoch bump or
// rebalance, the generation log). A paused, partitioned or host-crashed
// member still waits for its session timeout, and static members are
// exempt. Safety does not depend on it: an expelled member's tokens are
// dead like those of an expired one (connloss.go; docs/DESIGN.md has the
// argument).
//
// # Fenced commits
//
// OffsetCommit follows Kafka's rules for each protocol, and then checks
// every partition against the owners: a member may commit only a partition
// it owns, or one it just released and nobody has been given since (the
// hand-off commit). Anything else is refused per partition, with
// STALE_MEMBER_EPOCH in consumer groups and ILLEGAL_GENERATION in classic
// ones (offsets.go explains why those codes), so a zombie cannot move
// another owner's offset. Each accepted commit is recorded with its token.
//
// One limit is inherent to the classic protocol: a static member that
// restarts takes over its predecessor's assignment without a rebalance, so
// the generation cannot move and the new incarnation keeps the old tokens.
// The coordinator still refuses every request of the old member ID
// (FENCED_INSTANCE_ID), but a downstream fence that sees only tokens cannot
// tell the two incarnations apart. KIP-848 groups do not have this limit:
// a static successor gets fresh, higher tokens.
package coordinator
