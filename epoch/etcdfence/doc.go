// Package etcdfence fences writes to etcd with the fencing tokens of a
// tenure group.
//
// A member of a tenure group owns partitions, each with a fencing token: the
// group generation at which the member got the partition. A member paused by
// garbage collection or a slow disk can wake up still believing it owns a
// partition that has since moved to another member. Its clock cannot tell it
// otherwise, so the resource that receives its writes must: it remembers the
// newest token it has seen for each partition and rejects older ones. This
// package makes etcd such a resource.
//
// # Guarded writes
//
// [Fence.Put] applies the caller's operations (the effect) and records the
// caller's token in ONE etcd transaction, whose condition compares the token
// stored for the partition with the caller's:
//
//	If(stored token exists AND stored token > mine)
//	Then(get stored token)              -> rejected, *epoch.StaleError
//	Else(caller's ops..., put mine)     -> applied
//
// An equal token is admitted, because an owner keeps its token for every write
// it makes; a partition nobody has written yet admits any valid token. A
// token that no ownership carries, zero or negative (Kafka's generation -1),
// is never admitted: Put returns an error wrapping [epoch.ErrNoToken] without
// reaching etcd, so it writes nothing. A rejection returns an
// [*epoch.StaleError] (errors.Is(err, epoch.ErrStale)) whose Current is the
// stored token, read by the same transaction: a write costs one round trip
// whether it is applied or rejected.
//
// Why one transaction: a check followed by a separate write lets a zombie's
// write slip between the two. The zombie reads token 4, stalls, the new owner
// writes with token 5, then the zombie's write lands on top of it with nothing
// left to stop it. etcd evaluates the comparison and applies the chosen branch
// atomically at one revision, so nothing can come between the check and the
// effect.
//
// [Fence.Admit] is the same transaction with no effect: it records the token
// (so older tokens are rejected from then on) and implements [epoch.Fence].
// [Fence.Current] reads the stored token.
//
// # Signed tokens
//
// Built with [WithVerifier], a Fence also refuses tokens the coordinator
// never issued for its partitions: [Fence.PutSigned] and [Fence.AdmitSigned] check the
// signed token ([epoch.SignedToken], what member.Claim.Token returns) with
// the verifier before anything reaches etcd, and refuse one that is
// unsigned (when the verifier requires signatures), signed by an unknown or
// revoked key, or signed for another group, topic, partition or member,
// with an error wrapping [epoch.ErrUnverified]: the stored token does not
// move and the effect is not applied. The verifier caches the last token
// it verified per partition, so an owner's writes pay one signature check.
// The check runs in the process that calls the fence: it stops a buggy
// writer, and a hostile one only if the writer cannot reach the resource
// but through a process of the resource's own (docs/SECURITY.md).
//
// # Key layout
//
// A Fence keeps one key per partition under the prefix given to [New]:
//
//	<prefix>/tokens/<partition>
//
// where <partition> is the partition number in decimal (see [Fence.Key]). The
// value is the token's int64 value with its sign bit flipped, as 8 bytes
// big-endian. etcd compares values byte by byte, and this encoding makes byte
// order equal numeric order over the whole int64 range (only positive tokens
// are ever stored, but the order holds for any); decimal text would not (etcd
// would sort "10" before "9").
//
// Nothing but a Fence should write these keys. Put refuses caller operations
// that would write or delete any key under <prefix>/tokens/ ([ErrTokenKey]),
// since such a write could move a token backwards. The caller's effect keys
// may live anywhere else, including under the same prefix (for example
// <prefix>/data/...).
//
// # Limits
//
// The effect and the token update share one transaction, so they count
// together against the server's limit on operations per transaction
// (--max-txn-ops, 128 by default) and on request size, and etcd refuses a
// transaction that writes the same key twice. As with any etcd write, an error
// other than a rejection (a timeout, a lost connection) leaves the outcome
// unknown: the transaction may or may not have been applied. Retrying with the
// same token is safe for the fence, since an equal token is admitted again;
// whether repeating the effect is safe is up to the caller.
package etcdfence
