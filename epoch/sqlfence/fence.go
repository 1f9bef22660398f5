package sqlfence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/tenure-dev/tenure/epoch"
)

// Fence guards writes to a PostgreSQL database with fencing tokens kept in
// one table, one row per partition. It holds no state of its own beyond the
// *sql.DB, so Fences in any number of processes that name the same table
// guard the same partitions. A Fence is safe for concurrent use.
type Fence struct {
	db       *sql.DB
	table    string // quoted
	verifier *epoch.Verifier

	createSQL  string
	upsertSQL  string
	currentSQL string
}

var _ epoch.SignedFence = (*Fence)(nil)

// Option configures a Fence; see New.
type Option func(*Fence)

// WithVerifier makes the fence check signed tokens with v before it
// touches the database ([Fence.DoSigned], [Fence.AdmitTxSigned],
// [Fence.AdmitSigned]), and, if v requires signatures, refuse every plain
// token given to Do, AdmitTx and Admit. Without it the fence checks tokens
// only against each other, and takes a signed token's Token alone.
func WithVerifier(v *epoch.Verifier) Option { return func(f *Fence) { f.verifier = v } }

// New returns a Fence keeping its tokens in table, which must exist before
// the Fence is used (see [Fence.CreateTable]). table is a plain or
// schema-qualified identifier (see the package doc); anything else returns an
// error wrapping [ErrTableName]. New does not touch the database.
func New(db *sql.DB, table string, opts ...Option) (*Fence, error) {
	if db == nil {
		return nil, errors.New("sqlfence: nil *sql.DB")
	}
	t, err := quoteTable(table)
	if err != nil {
		return nil, err
	}
	f := &Fence{
		db:    db,
		table: t,
		createSQL: `CREATE TABLE IF NOT EXISTS ` + t + ` (` +
			`"partition" integer PRIMARY KEY, ` +
			`"token" bigint NOT NULL)`,
		// The alias names the stored row in the WHERE clause whatever the
		// table's qualification.
		upsertSQL: `INSERT INTO ` + t + ` AS cur ("partition", "token") VALUES ($1, $2) ` +
			`ON CONFLICT ("partition") DO UPDATE SET "token" = EXCLUDED."token" ` +
			`WHERE cur."token" <= EXCLUDED."token"`,
		currentSQL: `SELECT "token" FROM ` + t + ` WHERE "partition" = $1`,
	}
	for _, o := range opts {
		o(f)
	}
	return f, nil
}

// CreateTable creates the Fence's table if it does not exist. It does not
// check the columns of an existing table. Processes that start together may
// all call it: see [ExecLocked].
func (f *Fence) CreateTable(ctx context.Context) error {
	if err := ExecLocked(ctx, f.db, f.table, f.createSQL); err != nil {
		return fmt.Errorf("sqlfence: create table: %w", err)
	}
	return nil
}

// ExecLocked runs the statement ddl in a transaction that first takes a
// transaction-scoped advisory lock on key, so that processes running the
// same DDL at the same time take turns. PostgreSQL's CREATE TABLE IF NOT
// EXISTS is not safe on its own when two sessions run it at once: one of
// them fails with a unique violation on the catalog.
func ExecLocked(ctx context.Context, db *sql.DB, key, ddl string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // a no-op after Commit
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, key); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, ddl); err != nil {
		return err
	}
	return tx.Commit()
}

// Do runs fn in a transaction that first records token t for partition p,
// and commits if and only if t is not older than the token stored for p and
// fn succeeds. fn must do its work through tx and must not commit or roll it
// back; it runs holding p's row lock, so writers of the same partition wait
// for it.
//
// If a newer token is stored, fn is not called, nothing is written and the
// error is an [*epoch.StaleError] (wrapping [epoch.ErrStale]) with Current
// set to the stored token. A token that is not [epoch.Token.Valid] (zero, or
// negative such as Kafka's generation -1) returns an error wrapping
// [epoch.ErrNoToken] without touching the database, and fn is not called.
// If fn returns an error (or panics), the transaction is rolled back and Do
// returns fn's error (or lets the panic continue). A nil fn records the token
// only, like [Fence.Admit] but inside an explicit transaction.
//
// Do begins the transaction with the database's default isolation; for other
// options, begin the transaction yourself and call [Fence.AdmitTx].
func (f *Fence) Do(ctx context.Context, p epoch.Partition, t epoch.Token, fn func(ctx context.Context, tx *sql.Tx) error) error {
	if err := f.checkUnsigned(p, t); err != nil {
		return err
	}
	return f.do(ctx, p, t, fn)
}

// DoSigned is Do for a signed token: the fence's verifier checks it
// first, and a token that does not verify (an invented one, another
// partition's, group's or member's, one of an unknown or revoked key, a
// tampered signature) is refused with a [*epoch.VerifyError] wrapping
// [epoch.ErrUnverified] before a transaction begins: fn is not called and
// the stored token does not move. A verified token is cached by the
// verifier, so an owner's further writes pay no signature check. Without
// a verifier DoSigned is Do of t.Token.
func (f *Fence) DoSigned(ctx context.Context, p epoch.Partition, t epoch.SignedToken, fn func(ctx context.Context, tx *sql.Tx) error) error {
	if err := f.checkSigned(p, t); err != nil {
		return err
	}
	return f.do(ctx, p, t.Token, fn)
}

// do is Do once t is known to be a token the fence may admit.
func (f *Fence) do(ctx context.Context, p epoch.Partition, t epoch.Token, fn func(ctx context.Context, tx *sql.Tx) error) error {
	tx, err := f.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlfence: begin: %w", err)
	}
	// Undoes everything on every path but a successful Commit, including a
	// panic in fn; after Commit it is a no-op.
	defer tx.Rollback()

	if err := f.admit(ctx, tx, p, t); err != nil {
		return err
	}
	if fn != nil {
		if err := fn(ctx, tx); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlfence: partition %d token %v: commit: %w", p, t, err)
	}
	return nil
}

// AdmitTx records token t for partition p inside tx, a transaction the caller
// began (with whatever options) and will commit or roll back. Call it before
// the effect it guards: from then on the transaction holds p's row lock.
//
// It returns an [*epoch.StaleError] if a newer token is stored; the caller
// must then roll tx back rather than apply the effect. It returns an error
// wrapping [epoch.ErrNoToken], without using tx, for a token that is not
// [epoch.Token.Valid] (zero or negative). It returns the database's errors
// wrapped (errors.As reaches the driver's error); under REPEATABLE READ or
// SERIALIZABLE they include serialization failures the caller may retry.
func (f *Fence) AdmitTx(ctx context.Context, tx *sql.Tx, p epoch.Partition, t epoch.Token) error {
	if err := f.checkUnsigned(p, t); err != nil {
		return err
	}
	return f.admit(ctx, tx, p, t)
}

// AdmitTxSigned is AdmitTx for a signed token, which the fence's verifier
// checks first, as [Fence.DoSigned] does, without using tx if it does not
// verify: the caller must then roll tx back.
func (f *Fence) AdmitTxSigned(ctx context.Context, tx *sql.Tx, p epoch.Partition, t epoch.SignedToken) error {
	if err := f.checkSigned(p, t); err != nil {
		return err
	}
	return f.admit(ctx, tx, p, t.Token)
}

// checkUnsigned refuses, before any statement, an unsigned token that is
// not valid or that the verifier does not take unsigned.
func (f *Fence) checkUnsigned(p epoch.Partition, t epoch.Token) error {
	if !t.Valid() {
		return fmt.Errorf("sqlfence: partition %d token %v: %w", p, t, epoch.ErrNoToken)
	}
	return f.verifier.CheckUnsigned(p, t)
}

// checkSigned refuses, before any statement, a signed token that is not
// valid or does not verify.
func (f *Fence) checkSigned(p epoch.Partition, t epoch.SignedToken) error {
	if !t.Token.Valid() {
		return fmt.Errorf("sqlfence: partition %d token %v: %w", p, t.Token, epoch.ErrNoToken)
	}
	return f.verifier.Verify(p, t)
}

// querier is what admit needs of a *sql.DB or a *sql.Tx.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// admit records t for p through q (the database for Admit, the caller's
// transaction for AdmitTx and Do) once t is known to be a token the fence
// may admit.
func (f *Fence) admit(ctx context.Context, q querier, p epoch.Partition, t epoch.Token) error {
	res, err := q.ExecContext(ctx, f.upsertSQL, int32(p), int64(t))
	if err != nil {
		return fmt.Errorf("sqlfence: partition %d token %v: %w", p, t, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("sqlfence: partition %d token %v: rows affected: %w", p, t, err)
	}
	if n == 1 {
		return nil
	}
	stale := &epoch.StaleError{Partition: p, Token: t}
	// The row exists (else the insert would have succeeded) and, under READ
	// COMMITTED, this statement sees the committed token that beat ours
	// (outside a transaction: the newest one stored at that moment).
	var cur int64
	if err := q.QueryRowContext(ctx, f.currentSQL, int32(p)).Scan(&cur); err == nil {
		stale.Current = epoch.Token(cur)
	}
	return stale
}

// Admit records token t for partition p with no other effect, rejecting it
// like [Fence.Do] if a newer token is stored, or if t is not
// [epoch.Token.Valid] ([epoch.ErrNoToken]). It implements [epoch.Fence].
//
// Admit runs a single statement outside any explicit transaction, so it costs
// one round trip when it admits. When it rejects, a second statement reads
// the StaleError's Current, which is then the newest token stored at that
// moment: never older than the one that caused the rejection.
func (f *Fence) Admit(ctx context.Context, p epoch.Partition, t epoch.Token) error {
	if err := f.checkUnsigned(p, t); err != nil {
		return err
	}
	return f.admit(ctx, f.db, p, t)
}

// AdmitSigned records the signed token t for partition p with no other
// effect, once the fence's verifier has checked it as [Fence.DoSigned]
// does. It implements [epoch.SignedFence].
func (f *Fence) AdmitSigned(ctx context.Context, p epoch.Partition, t epoch.SignedToken) error {
	if err := f.checkSigned(p, t); err != nil {
		return err
	}
	return f.admit(ctx, f.db, p, t.Token)
}

// Current returns the token stored for partition p, or [epoch.None] if no
// token has been admitted for it.
func (f *Fence) Current(ctx context.Context, p epoch.Partition) (epoch.Token, error) {
	var cur int64
	err := f.db.QueryRowContext(ctx, f.currentSQL, int32(p)).Scan(&cur)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return epoch.None, nil
	case err != nil:
		return epoch.None, fmt.Errorf("sqlfence: partition %d: %w", p, err)
	}
	return epoch.Token(cur), nil
}
