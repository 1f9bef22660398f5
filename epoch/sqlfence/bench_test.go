package sqlfence_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/tenure-dev/tenure/epoch/internal/fencetest"
	"github.com/tenure-dev/tenure/epoch/sqlfence"
)

// BenchmarkDo measures an admitted guarded write with a one-row effect: BEGIN,
// the token statement, the effect, COMMIT.
func BenchmarkDo(b *testing.B) {
	f, _ := newFence(b, "bench")
	effects := newEffects(b, "bench")
	// No fixed deadline (testenv's 20 s): a benchmark's run of -benchtime 100x
	// can outlast any fixed deadline on a loaded machine.
	ctx := b.Context()
	// label is UNIQUE in the effects table; the effect here rewrites one row.
	if _, err := testDB.ExecContext(ctx, `INSERT INTO `+effects+` (part, token, label) VALUES (0, 1, 'x')`); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		err := f.Do(ctx, 0, 1, func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `UPDATE `+effects+` SET token = token WHERE label = 'x'`)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAdmit measures an admitted Admit: one autocommitted statement.
func BenchmarkAdmit(b *testing.B) {
	f, _ := newFence(b, "benchadmit")
	ctx := b.Context()
	for b.Loop() {
		if err := f.Admit(ctx, 0, 1); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDoVerified compares guarded writes (one-row effect) without a
// verifier and with one, in alternating batches of one run (see
// fencetest.CompareVerified): the cost of verification, cached per token.
//
//	go test -run '^$' -bench BenchmarkDoVerified -benchtime 20x ./epoch/sqlfence/
func BenchmarkDoVerified(b *testing.B) {
	db := needDB(b)
	k := fencetest.NewKeys(b)
	off, table := newFence(b, "benchoff")
	on, err := sqlfence.New(db, table, sqlfence.WithVerifier(k.Verifier()))
	if err != nil {
		b.Fatal(err)
	}
	effects := newEffects(b, "benchverify")
	ctx := b.Context()
	if _, err := db.ExecContext(ctx, `INSERT INTO `+effects+` (part, token, label) VALUES (0, 1, 'off'), (1, 1, 'on')`); err != nil {
		b.Fatal(err)
	}
	effect := func(label string) func(context.Context, *sql.Tx) error {
		return func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `UPDATE `+effects+` SET token = token WHERE label = $1`, label)
			return err
		}
	}
	st := fencetest.Grant(k.Active, 1, 1, "bob")
	fencetest.CompareVerified(b, 50,
		func() error { return off.Do(ctx, 0, 1, effect("off")) },
		func() error { return on.DoSigned(ctx, 1, st, effect("on")) })
}
