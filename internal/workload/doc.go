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
//
// Every record carries the worker's name (Record.Worker, stable across
// rejoins) and the member ID of the claim it was written under
// (Record.Member, member.Claim.MemberID), in the etcd value and in the
// PostgreSQL table's member column.
//
// # Several resources
//
// A [Fanout] writes every record to several resources in turn (`tenure
// worker --resource postgres,etcd`); the record is written once all
// accepted it, and a stale rejection by any of them ends the claim.
//
// # Signed tokens and forgeries
//
// Built with [Verify], a resource's fence checks each token with an
// epoch.Verifier before it writes: a claim's token is signed by the
// coordinator (tenure serve --sign-grants; member.Claim.Token), and one
// that does not verify is refused with epoch.ErrUnverified, writing
// nothing. The worker does not end a claim for that (its keys may be
// behind a rotation): it tells [Config.Unverified], which fetches them
// again, and retries.
//
// A [Forger] is the hostile client of a chaos run: beside its worker's
// honest work it appends records under tokens it forges from its claims'
// (another partition's, a raised one, another member's, a tampered
// signature, a key of its own, an invented unsigned one), with negative
// sequence numbers, through the same resources. Verified, every one is
// refused; unverified, the invented ones raise the fences and bring the
// honest owners down, which a checker must catch.
//
// # Unfenced resources: a control, not a mode
//
// [NewUnfencedEtcdResource] and [NewUnfencedSQLResource] write the same
// records in the same layout without checking or recording any token
// (`tenure worker --unfenced`), so that a former owner's late writes land.
// They exist for one purpose: a chaos or demo run without fencing, to prove
// that the checker reading the resources catches the stale writes the
// fence would have rejected.
//
// # The attempt log
//
// With an [AttemptLog] (`tenure worker --attempt-log FILE`), a worker
// writes one JSON object per line for every operation it attempts on a
// resource or on the coordinator, and for every start and stop of a
// claim's work. Each line is appended with a single write as soon as the
// attempt's outcome is known (no fsync); a worker killed at any moment
// leaves every line it finished, and at most one torn last line, which
// [ReadAttempts] drops. Restarted workers append to the same file. Within
// one worker's lines, the order is the order in which attempts ended;
// attempts of different claims overlap. [Attempt] is the Go form of a
// line; [ReadAttempts] decodes a file.
//
// An attempt line:
//
//	{"t0":"2026-03-01T10:00:00.123456789Z","t1":"2026-03-01T10:00:00.125Z",
//	 "op":"append","worker":"w3","member":"Xq...","partition":5,"token":12,
//	 "seq":40,"resource":"postgres","outcome":"ok","held":false}
//
// (on one line in the file), with these fields:
//
//	t0, t1     when the attempt began (before the request was sent) and
//	           ended (its outcome known): RFC 3339, nanoseconds, UTC.
//	           Trailing zeros are dropped, so parse rather than compare
//	           the strings
//	op         "append": one record written to one resource
//	           "forge": a Forger's record under a forged token, to one
//	                    resource; cause names the forgery
//	           "admit": the claim's token admitted at one resource, at
//	                    the claim's start, before anything else
//	           "commit": the offset committed to the coordinator
//	           "fetch": the committed offset read from the coordinator,
//	                    after the admits
//	worker     the worker's name (Record.Worker)
//	member     the member ID the claim was granted under (Record.Member)
//	partition  the partition
//	token      the claim's fencing token
//	seq        append and forge only: the record's sequence number
//	offset     commit: the offset committed (records written so far);
//	           fetch, when ok: the offset read, -1 if none
//	resource   "postgres" or "etcd" for append and admit, "coordinator"
//	           for commit and fetch
//	outcome    "ok": accepted (an append or admit is in the resource, a
//	                 commit at the coordinator);
//	           "stale": rejected for a stale token (epoch.ErrStale), by the
//	                 resource's fence or by the coordinator; nothing was
//	                 written;
//	           "unverified": refused by the resource's verifier as not
//	                 issued for the partition (epoch.ErrUnverified);
//	                 nothing was written;
//	           "error": anything else, timeouts included (see
//	                 Config.WriteTimeout): the effect may or may not have
//	                 happened
//	err        the error's text; absent when ok
//	held       true for an append that a [Pause] held between the claim
//	           check that allowed it and the write (a zombie's write);
//	           false on every other line
//
// A record written to several resources ([Fanout]) gives one append line
// per resource, in the fan-out's order; a resource after one that failed
// is not tried, and has no line. Every failed append or admit is retried
// (with a new line) until it succeeds, its token is stale, or the claim
// ends; the record of a retried append is the same (partition, seq,
// token), which every resource stores once. In unfenced mode, appends
// and admits are never "stale".
//
// A claim line marks the start or the stop of the work on a claim, as the
// handler sees it:
//
//	{"t":"2026-03-01T10:00:00.1Z","op":"claim","worker":"w3","member":"Xq...",
//	 "partition":5,"token":12,"from":"Pending","to":"Owned","cause":"started"}
//
//	t          the instant (as t0)
//	from, to   names of epoch.State values:
//	           start: Pending -> Owned, cause "started" (a claim granted
//	                  at this token), or Suspect -> Owned, cause
//	                  "confirmed" (the coordinator confirmed a session the
//	                  member had doubted: same token, work resumes);
//	           stop:  Owned -> Revoking, Suspect or Lost, with the member
//	                  library's cause (member.ClaimChange.Cause: "revoked",
//	                  "leaving", "deadline", "session-expired", "fenced",
//	                  "unknown-member", "rebalance-timeout", ...), or
//	                  Owned -> Lost with the worker's own cause:
//	                  "resource-stale" (a resource rejected the token) or
//	                  "commit-rejected" (the coordinator did)
//
// Every attempt of a claim lies between its start line and its stop line:
// the start is logged before the first admit, the stop after the last
// attempt (the final commit of a revoked claim included). A worker killed
// during a claim writes no stop line. The lines come from the worker's
// handler, not from the member library: the library's own transitions
// (Pending when granted, Unowned when released) are not in the log.
package workload
