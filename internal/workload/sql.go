package workload

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/tenure-dev/tenure/epoch"
	"github.com/tenure-dev/tenure/epoch/sqlfence"
)

// SQLResource keeps records in a PostgreSQL table, fenced by a
// sqlfence.Fence whose table is named after it with a "_tokens" suffix:
//
//	CREATE TABLE <table> (
//		id        bigserial PRIMARY KEY,  -- acceptance order
//		partition integer NOT NULL,
//		seq       bigint  NOT NULL,
//		token     bigint  NOT NULL,
//		worker    text    NOT NULL,
//		written   timestamptz NOT NULL DEFAULT now(),
//		member    text,                   -- NULL in rows of older versions
//		UNIQUE (partition, seq, token)
//	)
//
// Each append is one transaction: the fence's token statement, then the
// INSERT of the record. The token statement holds the partition's row lock
// until the commit, so the records of one partition get their ids in the
// order they commit. One table serves one topic of one group.
type SQLResource struct {
	db        *sql.DB
	fence     *sqlfence.Fence
	unfenced  bool
	createSQL string
	probeSQL  string
	alterSQL  string
	insertSQL string
	listSQL   string
}

var _ Resource = (*SQLResource)(nil)

// NewSQLResource returns a resource keeping its records in table (and its
// tokens in table_tokens). table is a plain or schema-qualified name of
// ASCII letters, digits and underscores, not starting with a digit. db
// must be a PostgreSQL database; the caller closes it. The tables must
// exist before use: see [SQLResource.CreateTables].
func NewSQLResource(db *sql.DB, table string, opts ...Option) (*SQLResource, error) {
	return newSQLResource(db, table, false, opts...)
}

// NewUnfencedSQLResource returns a resource on the same tables as
// [NewSQLResource] that checks no token: Admit does nothing and Append
// inserts the record in a plain statement, so a former owner's late
// writes land. It is the control of a test or demo that must show what the
// fence prevents, never a way to run real work.
func NewUnfencedSQLResource(db *sql.DB, table string) (*SQLResource, error) {
	return newSQLResource(db, table, true)
}

func newSQLResource(db *sql.DB, table string, unfenced bool, opts ...Option) (*SQLResource, error) {
	if err := CheckTable(table); err != nil {
		return nil, err
	}
	t, _ := quoteTable(table)
	fence, err := sqlfence.New(db, table+"_tokens", sqlfence.WithVerifier(applyOptions(opts).verifier))
	if err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	return &SQLResource{
		db:       db,
		fence:    fence,
		unfenced: unfenced,
		createSQL: `CREATE TABLE IF NOT EXISTS ` + t + ` (` +
			`"id" bigserial PRIMARY KEY, ` +
			`"partition" integer NOT NULL, ` +
			`"seq" bigint NOT NULL, ` +
			`"token" bigint NOT NULL, ` +
			`"worker" text NOT NULL, ` +
			`"written" timestamptz NOT NULL DEFAULT now(), ` +
			`"member" text, ` +
			`UNIQUE ("partition", "seq", "token"))`,
		probeSQL: `SELECT "member" FROM ` + t + ` LIMIT 0`,
		alterSQL: `ALTER TABLE ` + t + ` ADD COLUMN IF NOT EXISTS "member" text`,
		insertSQL: `INSERT INTO ` + t + ` ("partition", "seq", "token", "worker", "member") VALUES ($1, $2, $3, $4, $5) ` +
			`ON CONFLICT ("partition", "seq", "token") DO NOTHING`,
		listSQL: `SELECT "id", "partition", "seq", "token", "worker", "member" FROM ` + t + ` ORDER BY "partition", "id"`,
	}, nil
}

// CreateTables creates the records table and the fence's table if they do
// not exist, and adds the member column to a records table made by an
// older version.
func (s *SQLResource) CreateTables(ctx context.Context) error {
	if err := s.fence.CreateTable(ctx); err != nil {
		return fmt.Errorf("workload: %w", err)
	}
	if err := sqlfence.ExecLocked(ctx, s.db, s.createSQL, s.createSQL); err != nil {
		return fmt.Errorf("workload: create records table: %w", err)
	}
	// ALTER TABLE takes the table's exclusive lock even when the column
	// exists, and waits behind every open transaction on the table: that
	// of a frozen worker would stall every INSERT queued behind the ALTER.
	// So it runs only when the column is missing.
	if _, err := s.db.ExecContext(ctx, s.probeSQL); err == nil {
		return nil
	}
	if err := sqlfence.ExecLocked(ctx, s.db, s.createSQL, s.alterSQL); err != nil {
		return fmt.Errorf("workload: add the member column: %w", err)
	}
	return nil
}

// Admit implements [Resource]. An unfenced resource admits everything and
// records nothing.
func (s *SQLResource) Admit(ctx context.Context, p epoch.Partition, t epoch.SignedToken) error {
	if s.unfenced {
		return nil
	}
	return s.fence.AdmitSigned(ctx, p, t)
}

// Append implements [Resource]: the token check and the INSERT in one
// transaction; an unfenced resource runs the INSERT alone.
func (s *SQLResource) Append(ctx context.Context, r Record, t epoch.SignedToken) error {
	if t.Token != r.Token {
		return ErrTokenMismatch
	}
	if s.unfenced {
		return s.insert(ctx, s.db, r)
	}
	return s.fence.DoSigned(ctx, r.Partition, t, func(ctx context.Context, tx *sql.Tx) error {
		return s.insert(ctx, tx, r)
	})
}

// execer is what insert needs of a *sql.DB or a *sql.Tx.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func (s *SQLResource) insert(ctx context.Context, ex execer, r Record) error {
	if _, err := ex.ExecContext(ctx, s.insertSQL, int32(r.Partition), r.Seq, int64(r.Token), r.Worker, r.Member); err != nil {
		return fmt.Errorf("workload: insert record: %w", err)
	}
	return nil
}

// Records implements [Resource]; Order is the row's id.
func (s *SQLResource) Records(ctx context.Context) ([]Stored, error) {
	rows, err := s.db.QueryContext(ctx, s.listSQL)
	if err != nil {
		return nil, fmt.Errorf("workload: read records: %w", err)
	}
	defer rows.Close()
	var out []Stored
	for rows.Next() {
		var st Stored
		var p int32
		var t int64
		var member sql.NullString // NULL in rows of older versions
		if err := rows.Scan(&st.Order, &p, &st.Seq, &t, &st.Worker, &member); err != nil {
			return nil, fmt.Errorf("workload: read records: %w", err)
		}
		st.Partition, st.Token, st.Member = epoch.Partition(p), epoch.Token(t), member.String
		out = append(out, st)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("workload: read records: %w", err)
	}
	return out, nil
}

// ErrTableName is returned by [NewSQLResource] for a table name it
// refuses.
var ErrTableName = errors.New("workload: invalid table name")

// CheckTable returns an error wrapping [ErrTableName] if
// [NewSQLResource] would refuse table: if it, or its fence's table
// (table_tokens), is not a valid name.
func CheckTable(table string) error {
	if _, err := quoteTable(table); err != nil {
		return err
	}
	if _, err := quoteTable(table + "_tokens"); err != nil {
		return fmt.Errorf("%w %q: the tokens table %s_tokens would be too long", ErrTableName, table, table)
	}
	return nil
}

// quoteTable validates name (table or schema.table) as sqlfence does for
// its own tables, and returns it quoted.
func quoteTable(name string) (string, error) {
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return "", fmt.Errorf("%w %q: at most one dot (schema.table)", ErrTableName, name)
	}
	for i, part := range parts {
		if !validIdent(part) {
			return "", fmt.Errorf("%w %q: want 1 to 63 ASCII letters, digits or underscores, not starting with a digit", ErrTableName, name)
		}
		parts[i] = `"` + part + `"`
	}
	return strings.Join(parts, "."), nil
}

func validIdent(s string) bool {
	if s == "" || len(s) > 63 || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
