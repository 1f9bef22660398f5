// Package workload is the fake work that `tenure worker` does on its
// claims: it appends numbered records to a fenced resource (etcd or
// PostgreSQL), one every work interval per partition, under the claim's
// fencing token, and commits its progress to the coordinator.
//
// It exists to show tenure's guarantees with real processes and real
// resources, not to be a framework: a [Worker] is a member.Handler, a
// [Resource] is a store of [Record]s whose appends are checked against the
// newest token seen for their partition, and [Pause] freezes a worker as a
// stop-the-world garbage collection would, so that its late writes can be
// seen being rejected.
//
// # One claim's work
//
// For every claim, [Worker.Handle]
//
//  1. admits the claim's token at the resource ([Resource.Admit]), so that
//     every former owner of the partition is fenced from that moment,
//     even before this owner's first record;
//  2. reads the committed offset: the sequence number of the next record,
//     where the previous owner stopped;
//  3. loops: checks the claim's context, works for the work interval,
//     appends the record under the claim's token ([Resource.Append]),
//     and commits the offset (records written) every CommitEvery records.
//
// The append is not given the claim's context: a write that was decided
// before the claim was revoked may still be on its way, as a write already
// on the wire would be. That is the write a fence exists for.
//
// A record is identified by its partition, sequence number and token, so a
// new owner that redoes records after the last commit writes new ones next
// to the old (at-least-once, visible), and an append retried after an
// unknown outcome rewrites the same record.
//
// When the claim's context is cancelled with member.ErrRevoked, the
// handler commits the offset and returns; after member.ErrSuspect or
// member.ErrLost it returns without committing. A rejected write
// (epoch.ErrStale) ends the claim's work: its token is dead.
package workload
