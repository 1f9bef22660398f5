// Package epoch holds what makes partition ownership safe in tenure: fencing
// tokens, the fences that check them, the lifecycle of one member's
// ownership of one partition, and the arithmetic that tells a member how
// long it may trust its session.
//
// Everything here is pure: no clock is read, no goroutine started, no I/O
// done. Times are inputs.
//
// # Tokens
//
// A [Token] is the group generation (epoch) at which the current owner of a
// partition received it. The coordinator persists every new generation
// before anyone learns it, so a partition's token only grows: each new owner
// holds a higher token than every owner before it, and an owner keeps its
// token for as long as it keeps the partition. The zero token, [None],
// means "no token"; only positive tokens are [Token.Valid].
//
// # Fences
//
// A lease alone cannot prevent two owners: a member that was paused (a long
// garbage collection, a frozen virtual machine) wakes up believing it still
// owns a partition that has since been given to someone else, and its next
// write lands after the new owner's. The only reliable check is made by the
// resource itself: a [Fence] remembers, per partition, the highest token it
// has admitted and rejects any lower one with an error wrapping [ErrStale]
// (a [*StaleError] says which tokens). The former owner's late write carries
// an older token and is rejected, however late it arrives.
//
// [MemFence] is the in-process fence; sub-packages keep the same rule in etcd
// (etcdfence) and in SQL databases (sqlfence).
//
//	var f epoch.MemFence
//	f.Admit(ctx, 3, 7) // nil: first token seen for partition 3
//	f.Admit(ctx, 3, 7) // nil: the same owner writes again
//	f.Admit(ctx, 3, 6) // *StaleError: an older owner, rejected
//
// # Signed tokens
//
// A fence cannot tell a token the coordinator issued from one it never
// did: a bug that passes an offset where the token belongs, another
// partition's token, a hostile client's invention. Admitted once, such a
// token raises the fence, and every honest owner is refused from then on.
// So tenure's coordinator can sign every grant ([Grant]: group, topic ID,
// partition, token, member) with an Ed25519 key ([Signer]), and the member
// library hands the signature out with the token ([SignedToken]). A fence
// built with a [Verifier] (the public keys of a [KeySet], the group and the
// topic it guards) admits a signed token only if it verifies, and refuses
// one that does not with an error wrapping [ErrUnverified] (not
// [ErrStale]), changing nothing:
//
//	v := epoch.NewVerifier(epoch.VerifierConfig{Group: "orders", TopicID: id, Keys: keys, RequireSigned: true})
//	f := epoch.NewMemFence(v)
//	f.AdmitSigned(ctx, 3, claim.Token()) // nil: issued for partition 3
//	f.AdmitSigned(ctx, 3, other)         // ErrBadSignature: issued for partition 7
//	f.Admit(ctx, 3, 1000)                // ErrUnsigned: nobody vouches for it
//
// A verifier remembers the last token it verified per partition, so an
// owner's stream of writes pays for one signature check.
//
// # Ownership lifecycle
//
// [Ownership] is one member's view of one partition, a state machine with
// one method per transition. Only [Owned] allows work ([State.Working]);
// every other state means stop, or do not start.
//
//	         Assign(t > highest)              Start
//	Unowned ──────────────────────► Pending ─────────► Owned
//	   ▲                               │                 │
//	   │ Release                       │ Revoke          │ Revoke
//	   │                               ▼                 │
//	Revoking ◄─────────────────────────┴─────────────────┘
//
//	Pending, Owned, Revoking ── Suspect ──► Suspect ── Confirm ──► the state it interrupted
//
//	Pending, Owned, Revoking, Suspect ── Lose ──► Lost ── Assign(t > highest) ──► Pending
//
// The transitions:
//
//   - Assign: the coordinator gave the partition with token t. From
//     [Unowned] or [Lost], to [Pending]. t must be higher than every token
//     this ownership ever held; a token that does not grow comes from the
//     network (a stale or replayed response), so Assign returns an error
//     wrapping [ErrStale] rather than panicking.
//   - Start: the previous owner has released the partition and the worker
//     is ready. [Pending] to [Owned].
//   - Revoke: graceful hand-off. [Owned] or [Pending] to [Revoking]: stop
//     new work, commit under the still-valid token, then Release.
//   - Release: [Revoking] to [Unowned]. The token is given up for good.
//   - Suspect: the member's safe-ownership deadline passed (see below), so
//     it cannot confirm that it is still a member. [Pending], [Owned] or
//     [Revoking] to [Suspect]. Work stops now.
//   - Confirm: the coordinator confirmed the session and this same token
//     again, after the member became Suspect. Back to the state Suspect
//     interrupted: a Revoking ownership does not resume work. The caller
//     decides when a confirmation counts.
//   - Lose: the session expired, or the coordinator or a fence rejected the
//     token. Any state that holds a token to [Lost]. The token is dead
//     forever; owning the partition again takes a new, higher token.
//
// Any other call is a bug in the caller and panics, naming the states and
// the partition, as in "epoch: illegal transition Lost -> Owned for
// partition 3: Start is allowed only in Pending". [Ownership.Can] tells
// beforehand.
//
// # Safe-ownership window
//
// The coordinator expires a member's session SessionTimeout after it last
// received a heartbeat, on the coordinator's clock. The member must stop
// work before that moment, without seeing the coordinator's clock. [Window]
// gives it a deadline on its own monotonic clock:
//
//	deadline = sent + SessionTimeout×(1−MaxDrift) − Margin
//
// where sent is the time at which the member sent its last heartbeat that
// the coordinator acknowledged. It counts from the send time, never from
// when the acknowledgement arrived: the coordinator cannot have received the
// heartbeat before it was sent, so its expiry is at least SessionTimeout
// after sent, whatever the network delay. The drift allowance covers a
// member clock that runs slower than the coordinator's (MaxDrift bounds the
// ratio of the member's clock rate to the coordinator's to [1−MaxDrift,
// 1+MaxDrift]), and the margin
// makes the deadline strictly earlier and leaves time to stop. A heartbeat
// whose acknowledgement is lost is harmless: the member keeps the older
// deadline while the coordinator's expiry, if anything, moves later.
//
// Worked example: SessionTimeout 10 s, MaxDrift 1 %, Margin 100 ms. The
// allowance is 10 s × 1 % = 100 ms, so the member becomes Suspect 10 s −
// 100 ms − 100 ms = 9.8 s after it sent its last acknowledged heartbeat.
// Even if its clock runs 1 % slow, those 9.8 s of member time are
// 9.8 s / 0.99 ≈ 9.899 s of coordinator time, about 101 ms before the
// earliest possible expiry at 10 s.
//
// # Timing rules
//
// [Timing] gathers the durations that decide ownership. [Timing.Validate]
// rejects combinations that are unsafe: all durations positive (the margin
// too), MaxDrift in [0, 0.5), HeartbeatInterval × 3 ≤ SessionTimeout, a
// suspect deadline longer than two heartbeat intervals (so that one lost
// heartbeat does not make members Suspect), and RebalanceTimeout ≥
// HeartbeatInterval. They play the part of Kubernetes leader election's
// LeaseDuration > RenewDeadline > RetryPeriod × 1.2.
package epoch
