package sqlfence_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/tenure-dev/tenure/internal/testenv"
)

// BenchmarkDo measures an admitted guarded write with a one-row effect: BEGIN,
// the token statement, the effect, COMMIT.
func BenchmarkDo(b *testing.B) {
	f, _ := newFence(b, "bench")
	effects := newEffects(b, "bench")
	ctx := testenv.Context(b)
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
	ctx := testenv.Context(b)
	for b.Loop() {
		if err := f.Admit(ctx, 0, 1); err != nil {
			b.Fatal(err)
		}
	}
}
