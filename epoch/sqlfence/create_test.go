package sqlfence_test

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/tenure-dev/tenure/epoch/sqlfence"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// TestCreateTableConcurrently starts many processes' worth of CreateTable
// calls on a table that does not exist yet, as a fleet of workers starting
// together does. Without the advisory lock, PostgreSQL fails all but one
// with a unique violation on its catalog.
func TestCreateTableConcurrently(t *testing.T) {
	db := needDB(t)
	ctx := testenv.Context(t)
	for round := range 5 {
		table := fmt.Sprintf("sqlfence_create_%d_%d", os.Getpid(), tableSeq.Add(1))
		t.Cleanup(func() { dropTable(t, table) })
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Go(func() {
				f, err := sqlfence.New(db, table)
				if err == nil {
					err = f.CreateTable(ctx)
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d: concurrent CreateTable: %v", round, err)
			}
		}
	}
}
