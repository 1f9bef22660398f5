// Package sqlfence fences writes to a PostgreSQL database with the fencing
// tokens of a tenure group, through database/sql.
//
// A member of a tenure group owns partitions, each with a fencing token: the
// group generation at which the member got the partition. A member paused by
// garbage collection or a slow disk can wake up still believing it owns a
// partition that has since moved to another member. Its clock cannot tell it
// otherwise, so the database that receives its writes must: it remembers the
// newest token it has seen for each partition, in a table, and rejects older
// ones.
//
// # Guarded writes
//
// [Fence.Do] runs the caller's effect in a transaction that first records the
// caller's token with one statement:
//
//	INSERT INTO <table> AS cur (partition, token) VALUES ($1, $2)
//	ON CONFLICT (partition) DO UPDATE SET token = EXCLUDED.token
//	WHERE cur.token <= EXCLUDED.token
//
// The statement inserts the row for a partition nobody has written yet, and
// otherwise moves the token forward only if the stored one is not newer. One
// affected row means admitted: Do calls the effect and commits. No affected
// row means a newer token is stored: Do rolls back without calling the effect
// and returns an [*epoch.StaleError] (errors.Is(err, epoch.ErrStale)) whose
// Current is the stored token. An equal token is admitted, because an owner
// keeps its token for every write it makes. A token that no ownership
// carries, zero or negative (Kafka's generation -1), is never admitted: Do
// returns an error wrapping [epoch.ErrNoToken] before it begins a
// transaction, so the effect is not called and nothing is written. If the
// effect returns an error, Do rolls back, so neither the effect nor the token
// is recorded, and returns that error.
//
// Why the check must be in the same transaction as the effect: a check
// followed by a separate write lets a zombie's write slip between the two.
// The zombie checks token 4, stalls, the new owner writes with token 5, then
// the zombie's write lands on top of it with nothing left to stop it.
//
// Why this is enough under READ COMMITTED, PostgreSQL's default isolation:
// the statement takes the partition's row lock (inserting or updating the row,
// or finding the conflicting row) and keeps it until the transaction ends. A
// concurrent writer of the same partition blocks on that lock, and when the
// first commits, PostgreSQL re-evaluates the WHERE clause against the row the
// first wrote, not against the writer's snapshot. So the writers of one
// partition run their check-and-effect one after another, in lock order; a
// zombie that queued behind a newer owner sees the newer token and is
// rejected. Writers of different partitions do not block each other. Under
// REPEATABLE READ or SERIALIZABLE (see [Fence.AdmitTx]), PostgreSQL aborts
// such a queued writer with a serialization failure (SQLSTATE 40001) instead;
// no stale write gets through either way, and the caller may retry.
//
// Since the token statement runs first, the effect runs holding the row lock:
// the effects of one partition commit in token order, and their reads see
// every effect admitted before them.
//
// [Fence.Admit] records a token with no effect and implements [epoch.Fence];
// [Fence.AdmitTx] performs the check inside a transaction the caller manages;
// [Fence.Current] reads the stored token.
//
// # Signed tokens
//
// Built with [WithVerifier], a Fence also refuses tokens the coordinator
// never issued for its partitions: [Fence.DoSigned], [Fence.AdmitTxSigned] and [Fence.AdmitSigned] check the
// signed token ([epoch.SignedToken], what member.Claim.Token returns) with
// the verifier before anything reaches the database, and refuse one that is
// unsigned (when the verifier requires signatures), signed by an unknown or
// revoked key, or signed for another group, topic, partition or member,
// with an error wrapping [epoch.ErrUnverified]: the stored token does not
// move and the effect is not applied. The verifier caches the last token
// it verified per partition, so an owner's writes pay one signature check.
// The check runs in the process that calls the fence: it stops a buggy
// writer, and a hostile one only if the writer cannot reach the resource
// but through a process of the resource's own (docs/SECURITY.md).
//
// # The table
//
// A Fence keeps one row per partition in a table named by the caller:
//
//	CREATE TABLE IF NOT EXISTS <table> (
//		partition integer PRIMARY KEY,
//		token     bigint  NOT NULL
//	)
//
// [Fence.CreateTable] creates it. Many Fences, in many processes, share it;
// nothing else should write it. The table name is an identifier, optionally
// schema-qualified (schema.table), of ASCII letters, digits and underscores,
// not starting with a digit, each part at most 63 bytes; it is always quoted,
// so it is case-sensitive and may be a reserved word.
//
// # Dialect
//
// The statements are PostgreSQL's ($n placeholders, INSERT ... ON CONFLICT),
// so db must be a PostgreSQL database (or one speaking its dialect, such as
// CockroachDB), through any database/sql driver, for example pgx's stdlib.
//
// As with any database write, an error from Commit (a lost connection, a
// timeout) can leave the outcome unknown: the transaction may or may not have
// committed. Retrying with the same token is safe for the fence, since an
// equal token is admitted again; whether repeating the effect is safe is up
// to the caller.
package sqlfence
