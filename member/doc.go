// Package member is tenure's member library: a worker joins a group,
// claims partitions, and works on each under a fencing token, stopping the
// moment its ownership is in doubt.
//
// It speaks the standard KIP-848 consumer group protocol
// (ConsumerGroupHeartbeat), so it works against tenure's coordinator and
// against Kafka 4 (or kfake). What stock Kafka clients do not give a worker,
// it does:
//
//   - a fencing token per partition, to attach to every write, so that a
//     resource (an epoch.Fence) rejects the writes of a former owner;
//   - work that stops before the coordinator can give the partition to
//     someone else, even when the member is cut off and hears nothing: a
//     stock KIP-848 client whose network is cut keeps believing it owns its
//     partitions indefinitely;
//   - commits that the coordinator checks against the partition's owner
//     and token.
//
// # Joining and working
//
//	s, err := member.Join(ctx, member.Config{
//		Brokers: []string{"tenure:9092"},
//		Group:   "workers",
//		Topics:  []string{"jobs"},
//	}, func(c *member.Claim) {
//		ctx := c.Context()
//		next, _ := c.Committed(ctx)         // where the previous owner stopped
//		for ctx.Err() == nil {
//			next = work(ctx, c.Partition(), c.Token(), next) // fenced writes
//			c.Commit(ctx, next, "")
//		}
//		if errors.Is(context.Cause(ctx), member.ErrRevoked) {
//			c.Commit(context.Background(), next, "") // graceful hand-off
//		}
//	})
//	...
//	s.Close(ctx) // revoke everything, wait for the handlers, leave
//
// [Join] returns once the coordinator acknowledged the member. From then
// on the library runs the [Handler] in a goroutine of its own for every
// partition the member claims; each run gets a [Claim] with the partition,
// its token ([Claim.Token]) and a context ([Claim.Context]).
//
// # Tokens
//
// A claim's token is the member epoch at which the member took the
// partition: the epoch of the first response it received that assigned the
// partition (or, for a partition that waited for revocations to complete,
// the member epoch when it stopped waiting). The member reports the
// partition as its own in its very next heartbeat, at that epoch, and
// tenure's coordinator records the epoch of that first report as the
// partition's token, so both agree even when the response that first
// assigned the partition was lost. The member keeps the token for as long
// as it keeps the partition. Every later owner of the partition holds a
// higher token, so a resource that remembers the highest token it has
// admitted per partition (see package epoch: MemFence, etcdfence,
// sqlfence) rejects every write of a former owner, however late it
// arrives. A token that was lost is dead forever: if the partition comes
// back, it comes with a new, higher token, in a new Claim.
//
// # Signed tokens
//
// A tenure coordinator started with --sign-grants signs every partition it
// gives a member (Ed25519, over the group, topic ID, partition, token and
// member ID) and sends the signature in a tagged field of its heartbeat
// responses, which stock clients skip. [Claim.Token] returns the token
// with its signature ([epoch.SignedToken]); a fence with an
// [epoch.Verifier] of the coordinator's published keys
// ([epoch.SignedFence.AdmitSigned]) admits only tokens signed for its
// partition, so a token invented by a bug, or copied from another
// partition, group or member, never raises it. When the coordinator's key
// rotates, every held claim is signed again under the new key within a
// heartbeat: call Token for each write rather than keep its value. Against
// Kafka or kfake tokens are unsigned, as they are with tenure without
// --sign-grants.
//
// # When work stops
//
// A claim's context is cancelled, with a cause that says why
// (context.Cause, errors.Is):
//
//   - [ErrRevoked]: the coordinator moves the partition (a member joined or
//     left), or the session is closing or draining. The token is still
//     valid: commit what was done, then return. The partition is handed to
//     its next owner only after the handler returns and the coordinator
//     has been told.
//   - [ErrSuspect]: the member could not confirm its session in time.
//     Stop at once, do not commit: the coordinator may be about to give the
//     partition away. If the coordinator confirms the session after all,
//     the handler runs again under the same token.
//   - [ErrLost]: the coordinator fenced or forgot the member, its session
//     surely expired, or a commit was rejected. The token is dead.
//
// The coordinator expires a session SessionTimeout after the last heartbeat
// it received, on its own clock. The member cannot see that clock, so it
// counts from the moment it sent its last heartbeat that the coordinator
// acknowledged, on its own monotonic clock, and allows for clock drift and
// a margin (epoch.Window):
//
//	suspect at = send time of the last acknowledged heartbeat
//	             + SessionTimeout × (1 − MaxDrift) − SuspectMargin
//
// With the defaults (session 20 s, drift 1 %, margin 1 s) claims go
// Suspect 18.8 s after that send, whatever the network does: a response that
// arrives late revives nothing unless its own heartbeat was sent less than
// 18.8 s before. At SessionTimeout × (1 + MaxDrift) after it the coordinator
// has surely expired the session: claims are Lost and the member rejoins.
// A handler that does not return within the rebalance timeout after its
// claim was revoked gets the member evicted: all its claims are Lost at
// the earliest instant the coordinator may do so.
//
// # Commits
//
// [Claim.Commit] sends an OffsetCommit v9 carrying the member ID and
// current member epoch. tenure's coordinator accepts it only from the
// partition's owner at a token no older than the partition's, and answers
// STALE_MEMBER_EPOCH otherwise; the library then returns a [*CommitError]
// wrapping epoch.ErrStale and the claim is Lost. A commit on a Suspect,
// Lost or released claim is refused without a request. (kfake and Kafka
// check the member and its epoch, not which member owns the partition.)
// The commit goes to the coordinator the heartbeats go to, found again if
// it moved, not through kgo's coordinator cache (docs/FAILOVER.md).
// [Claim.Committed] reads the committed offset, with an OffsetFetch v9,
// from that same coordinator.
//
// # Leaving
//
// [Session.Close] revokes every claim, waits for the handlers to commit
// and return, then leaves, so the coordinator hands the partitions over at
// once. A static member ([Config.InstanceID]) leaves temporarily: the
// coordinator keeps its partitions for it until its session timeout, so a
// restart does not move them. [Session.Drain] releases every partition the
// same way but stays in the group, owning nothing.
//
// # Configuration
//
// [Config.SessionTimeout] must be the coordinator's (or lower): the
// protocol does not tell members. Join checks the timing with the heartbeat
// interval the coordinator returns, by the rules of epoch.Timing (three
// heartbeats per session, a suspect deadline beyond two heartbeat
// intervals plus a request timeout, ...), and fails with an error wrapping
// epoch.ErrUnsafeTiming if healthy members would go Suspect.
//
// The client is franz-go's kgo: it finds the coordinator, reconnects, and
// brings TLS and SASL ([Config.TLS], [Config.SASL]). Requests are sent raw
// (kmsg), so the library does not consume as a kgo group does.
//
// # The core
//
// The decisions are made by [Machine], a pure state machine: time comes in
// as an argument, effects go out through [Ready], and it never reads a
// clock, starts a goroutine or touches a socket. [Join]'s shell, tenure's
// simulator and the tests drive the same Machine. The shell's loop is one
// goroutine that owns the Machine: it sends each [Ready.Heartbeat] with a
// RequestTimeout and feeds back a [HeartbeatResponse] or
// [HeartbeatFailed]; it starts and cancels handlers as [Ready.Changes]
// say and reports [Started] and [Released]; it reports [CommitRejected];
// and it calls [Machine.Tick] from a single timer armed to
// [Ready.NextTick].
//
// The Machine reconciles assignments as KIP-848 asks: partitions no longer
// assigned are revoked first (Owned -> Revoking), their release is
// acknowledged in the next heartbeat, and only then are new partitions
// accepted (Pending, then Owned once the handler started). Each claim
// follows epoch.Ownership's lifecycle; input from the network is checked
// before any transition, so none panics. Heartbeats are built as Kafka's
// client builds them: the first (epoch 0) carries everything, with the
// owned partitions as an empty list; later ones carry only what changed
// (the owned partitions, by topic ID, when they changed), and everything
// again after a failure.
//
// The coordinator assigns partitions by topic ID; claims are named by
// topic. The Machine learns names from [MachineConfig.TopicIDs] and
// [TopicIDs] events, and asks for the IDs it cannot name in
// [Ready.Resolve]; their partitions are acknowledged but not worked on
// until then.
package member
