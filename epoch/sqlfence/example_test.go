package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/tenure-dev/tenure/epoch"
	"github.com/tenure-dev/tenure/epoch/sqlfence"
)

// A worker owning partition 7 at generation 4 records its results through the
// fence. The partition moves to a new owner at generation 5, who records
// results too. Then the first worker wakes up from a long pause and tries
// again: the fence rejects it, and its insert never commits.
func Example() {
	db, err := sql.Open("pgx", os.Getenv("TENURE_TEST_POSTGRES"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	ctx := context.Background()

	// Table names unique to this process, so parallel runs do not collide.
	fences := fmt.Sprintf("example_fence_%d", os.Getpid())
	results := fmt.Sprintf("example_results_%d", os.Getpid())
	defer db.ExecContext(ctx, "DROP TABLE IF EXISTS "+fences+", "+results)

	fence, err := sqlfence.New(db, fences)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := fence.CreateTable(ctx); err != nil {
		fmt.Println(err)
		return
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+results+" (part integer, result text)"); err != nil {
		fmt.Println(err)
		return
	}

	write := func(token epoch.Token, result string) {
		err := fence.Do(ctx, 7, token, func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, "INSERT INTO "+results+" VALUES ($1, $2)", 7, result)
			return err
		})
		var stale *epoch.StaleError
		switch {
		case errors.As(err, &stale):
			fmt.Printf("token %v rejected: partition %d is at token %v\n", token, stale.Partition, stale.Current)
		case err != nil:
			fmt.Println(err)
		default:
			fmt.Printf("token %v recorded %q\n", token, result)
		}
	}
	write(4, "first owner")
	write(5, "second owner")
	write(4, "zombie")

	rows, err := db.QueryContext(ctx, "SELECT result FROM "+results+" ORDER BY result")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("stored:", r)
	}
	// Output:
	// token 4 recorded "first owner"
	// token 5 recorded "second owner"
	// token 4 rejected: partition 7 is at token 5
	// stored: first owner
	// stored: second owner
}
