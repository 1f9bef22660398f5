package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/tenure-dev/tenure/epoch"
	"github.com/tenure-dev/tenure/epoch/internal/fencetest"
	"github.com/tenure-dev/tenure/epoch/sqlfence"
	"github.com/tenure-dev/tenure/internal/testenv"
)

func wantCurrent(t testing.TB, f *sqlfence.Fence, p epoch.Partition, want epoch.Token) {
	t.Helper()
	got, err := f.Current(testenv.Context(t), p)
	if err != nil {
		t.Fatalf("Current(%d): %v", p, err)
	}
	if got != want {
		t.Fatalf("Current(%d) = %v, want %v", p, got, want)
	}
}

// recordEffect returns an effect that inserts one row labelled label into
// the effects table.
func recordEffect(effects string, p epoch.Partition, tok epoch.Token, label string) func(context.Context, *sql.Tx) error {
	return func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO `+effects+` (part, token, label) VALUES ($1, $2, $3)`, int32(p), int64(tok), label)
		return err
	}
}

// labels returns the labels in the effects table, in commit order.
func labels(t testing.TB, effects string) []string {
	t.Helper()
	rows, err := testDB.QueryContext(testenv.Context(t), `SELECT label FROM `+effects+` ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDo walks one partition through the cases a fence must tell apart,
// checking after each write both the stored token and which effects landed.
func TestDo(t *testing.T) {
	f, _ := newFence(t, "do")
	effects := newEffects(t, "do")
	ctx := testenv.Context(t)
	const p epoch.Partition = 3

	steps := []struct {
		name    string
		token   epoch.Token
		stale   bool        // want a *StaleError
		noToken bool        // want ErrNoToken
		current epoch.Token // StaleError.Current, or the stored token after the step
	}{
		{name: "no generation refused before any write", token: -1, noToken: true, current: epoch.None},
		{name: "first write admitted", token: 5, current: 5},
		{name: "equal token admitted", token: 5, current: 5},
		{name: "lower token rejected", token: 4, stale: true, current: 5},
		{name: "higher token admitted", token: 9, current: 9},
		{name: "previous owner rejected", token: 5, stale: true, current: 9},
		{name: "no generation refused", token: -1, noToken: true, current: 9},
		{name: "zero token refused", token: 0, noToken: true, current: 9},
		{name: "most negative token refused", token: math.MinInt64, noToken: true, current: 9},
		{name: "equal token admitted again", token: 9, current: 9},
	}
	var applied []string
	for i, s := range steps {
		label := fmt.Sprintf("step %d token %d", i, s.token)
		called := false
		err := f.Do(ctx, p, s.token, func(ctx context.Context, tx *sql.Tx) error {
			called = true
			return recordEffect(effects, p, s.token, label)(ctx, tx)
		})
		switch {
		case s.stale:
			fencetest.WantStale(t, err, p, s.token, s.current)
			if called {
				t.Errorf("%s: effect called for a stale token", s.name)
			}
		case s.noToken:
			if !errors.Is(err, epoch.ErrNoToken) || errors.Is(err, epoch.ErrStale) {
				t.Fatalf("%s: Do = %v, want ErrNoToken", s.name, err)
			}
			if called {
				t.Errorf("%s: effect called without a valid token", s.name)
			}
		default:
			if err != nil {
				t.Fatalf("%s: Do: %v", s.name, err)
			}
			applied = append(applied, label)
		}
		if got := labels(t, effects); strings.Join(got, ",") != strings.Join(applied, ",") {
			t.Fatalf("%s: effects %q, want %q", s.name, got, applied)
		}
		wantCurrent(t, f, p, s.current)
	}
}

// TestEffectErrorRollsBack checks that a failing or panicking effect leaves
// neither its writes nor the token behind.
func TestEffectErrorRollsBack(t *testing.T) {
	f, _ := newFence(t, "rollback")
	effects := newEffects(t, "rollback")
	ctx := testenv.Context(t)
	if err := f.Admit(ctx, 0, 5); err != nil {
		t.Fatal(err)
	}

	boom := errors.New("boom")
	err := f.Do(ctx, 0, 7, func(ctx context.Context, tx *sql.Tx) error {
		if err := recordEffect(effects, 0, 7, "failed")(ctx, tx); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Do = %v, want the effect's error", err)
	}
	wantCurrent(t, f, 0, 5)

	func() {
		defer func() {
			if r := recover(); r != "kaboom" {
				t.Fatalf("recovered %v, want the effect's panic", r)
			}
		}()
		f.Do(ctx, 0, 8, func(ctx context.Context, tx *sql.Tx) error {
			if err := recordEffect(effects, 0, 8, "panicked")(ctx, tx); err != nil {
				return err
			}
			panic("kaboom")
		})
	}()
	wantCurrent(t, f, 0, 5)

	// An effect whose statement fails (here, a duplicate label) aborts the
	// transaction; the token must not move either.
	if err := f.Do(ctx, 0, 6, recordEffect(effects, 0, 6, "dup")); err != nil {
		t.Fatal(err)
	}
	if err := f.Do(ctx, 0, 9, recordEffect(effects, 0, 9, "dup")); err == nil {
		t.Fatal("Do with a failing statement succeeded")
	}
	wantCurrent(t, f, 0, 6)
	if got := labels(t, effects); strings.Join(got, ",") != "dup" {
		t.Fatalf("effects %q, want only the first dup", got)
	}
}

// TestAdmit checks Admit (no effect) and Do with a nil effect, which must
// fence each other, per partition.
func TestAdmit(t *testing.T) {
	f, _ := newFence(t, "admit")
	ctx := testenv.Context(t)
	wantCurrent(t, f, 1, epoch.None)
	if err := f.Admit(ctx, 1, 10); err != nil {
		t.Fatal(err)
	}
	if err := f.Admit(ctx, 1, 10); err != nil {
		t.Fatalf("equal token: %v", err)
	}
	fencetest.WantStale(t, f.Admit(ctx, 1, 9), 1, 9, 10)
	fencetest.WantStale(t, f.Do(ctx, 1, 9, nil), 1, 9, 10)
	if err := f.Do(ctx, 1, 11, nil); err != nil {
		t.Fatal(err)
	}
	fencetest.WantStale(t, f.Admit(ctx, 1, 10), 1, 10, 11)
	if err := f.Admit(ctx, 2, 1); err != nil {
		t.Fatalf("partition 2 fenced by partition 1: %v", err)
	}
	wantCurrent(t, f, 1, 11)
	wantCurrent(t, f, 2, 1)

	// Zero and negative tokens are refused, on a partition never written as
	// on one holding a token, and change neither.
	for _, tok := range []epoch.Token{0, -1, math.MinInt64} {
		for _, p := range []epoch.Partition{1, 3} {
			for _, err := range []error{f.Admit(ctx, p, tok), f.Do(ctx, p, tok, nil)} {
				if !errors.Is(err, epoch.ErrNoToken) {
					t.Fatalf("token %v on partition %d: %v, want ErrNoToken", tok, p, err)
				}
			}
		}
	}
	wantCurrent(t, f, 1, 11)
	wantCurrent(t, f, 3, epoch.None)
}

// TestAdmitTx checks the check inside a caller's SERIALIZABLE transaction:
// admitted, the caller commits with its effect; rejected, the caller rolls
// back.
func TestAdmitTx(t *testing.T) {
	f, _ := newFence(t, "admittx")
	effects := newEffects(t, "admittx")
	db := needDB(t)
	ctx := testenv.Context(t)
	write := func(tok epoch.Token, label string) error {
		tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelSerializable})
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if err := f.AdmitTx(ctx, tx, 0, tok); err != nil {
			return err
		}
		if err := recordEffect(effects, 0, tok, label)(ctx, tx); err != nil {
			return err
		}
		return tx.Commit()
	}
	if err := write(3, "a"); err != nil {
		t.Fatal(err)
	}
	fencetest.WantStale(t, write(2, "b"), 0, 2, 3)
	for _, tok := range []epoch.Token{0, -1} {
		if err := write(tok, "invalid"); !errors.Is(err, epoch.ErrNoToken) {
			t.Fatalf("AdmitTx(%v) = %v, want ErrNoToken", tok, err)
		}
	}
	if err := write(4, "c"); err != nil {
		t.Fatal(err)
	}
	if got := labels(t, effects); strings.Join(got, ",") != "a,c" {
		t.Fatalf("effects %q, want a,c", got)
	}
}

// TestTokenRange admits tokens across the whole positive int64 range in
// increasing order and checks every smaller one is then rejected, and that
// non-positive tokens are refused at every stage without moving the stored
// token.
func TestTokenRange(t *testing.T) {
	f, _ := newFence(t, "range")
	ctx := testenv.Context(t)
	const p = math.MaxInt32
	tokens := []epoch.Token{1, 9, 10, 1 << 40, math.MaxInt64}
	invalid := []epoch.Token{0, -1, -256, math.MinInt64}
	for i, tok := range tokens {
		if err := f.Admit(ctx, p, tok); err != nil {
			t.Fatalf("Admit(%v): %v", tok, err)
		}
		for _, older := range tokens[:i] {
			fencetest.WantStale(t, f.Admit(ctx, p, older), p, older, tok)
		}
		for _, bad := range invalid {
			if err := f.Admit(ctx, p, bad); !errors.Is(err, epoch.ErrNoToken) {
				t.Fatalf("Admit(%v) at %v = %v, want ErrNoToken", bad, tok, err)
			}
		}
		wantCurrent(t, f, p, tok)
	}
}

// TestQueuedWriterSeesNewerToken pins down the ordering the package doc
// promises under READ COMMITTED, deterministically: a zombie whose Do starts
// while the new owner's transaction holds the partition (an open AdmitTx at a
// newer token) waits for it, and once the owner commits, is judged against
// the token the owner committed, not against what was stored when the zombie
// started. A fence that reads the token and then writes it in a separate
// statement passes its check against the old token and then overwrites the
// new one. Both cases are covered: a partition never written (the zombie
// queues behind the owner's insert) and one holding an older token.
func TestQueuedWriterSeesNewerToken(t *testing.T) {
	for _, stored := range []epoch.Token{epoch.None, 5} {
		t.Run("stored "+stored.String(), func(t *testing.T) {
			f, table := newFence(t, "queued")
			effects := newEffects(t, "queued")
			db := needDB(t)
			ctx := testenv.Context(t)
			const p epoch.Partition = 0
			if stored != epoch.None {
				if err := f.Admit(ctx, p, stored); err != nil {
					t.Fatal(err)
				}
			}
			owner, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer owner.Rollback()
			if err := f.AdmitTx(ctx, owner, p, 7); err != nil {
				t.Fatal(err)
			}

			done := make(chan error, 1)
			go func() { done <- f.Do(ctx, p, 6, recordEffect(effects, p, 6, "zombie")) }()
			// Commit only once the zombie is blocked on the owner's lock in
			// a statement on the fence's table.
			for waiting := false; !waiting; {
				err := db.QueryRowContext(ctx, `SELECT count(*) > 0 FROM pg_stat_activity `+
					`WHERE wait_event_type = 'Lock' AND position($1 in query) > 0`, table).Scan(&waiting)
				if err != nil {
					t.Fatal(err)
				}
				select {
				case err := <-done:
					t.Fatalf("zombie's Do returned %v without waiting for the owner's transaction", err)
				case <-time.After(2 * time.Millisecond):
				}
			}
			if err := owner.Commit(); err != nil {
				t.Fatal(err)
			}
			fencetest.WantStale(t, <-done, p, 6, 7)
			wantCurrent(t, f, p, 7)
			if got := labels(t, effects); len(got) != 0 {
				t.Fatalf("zombie's effect committed: %q", got)
			}
		})
	}
}

// effect is one write a concurrent writer attempted.
type effect struct {
	label     string
	partition epoch.Partition
	token     epoch.Token
	accepted  bool
}

// TestConcurrentWriters races writers with random tokens on a few partitions,
// each holding its own connection while its transaction runs. Each write's
// effect inserts a row with a sequence number drawn after the fence's check.
// Afterwards, per partition: exactly the accepted effects exist; in sequence
// order their tokens never decrease (the row lock serialises the writers of
// a partition); every rejection saw a newer token; and the stored token is
// the largest accepted one.
func TestConcurrentWriters(t *testing.T) {
	const (
		writers    = 8
		writes     = 25
		partitions = 3
		spread     = 5 // tokens drift upwards, as generations do, this far apart at any moment
	)
	f, _ := newFence(t, "concurrent")
	effects := newEffects(t, "concurrent")
	ctx := testenv.Context(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)

	results := make([][]effect, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for i := range writes {
				e := effect{
					label:     fmt.Sprintf("%d-%d", w, i),
					partition: epoch.Partition(rng.IntN(partitions)),
					token:     epoch.Token(1 + i/2 + rng.IntN(spread)),
				}
				err := f.Do(ctx, e.partition, e.token, recordEffect(effects, e.partition, e.token, e.label))
				accepted, ok := fencetest.Racing(t, err, e.token)
				if !ok {
					return
				}
				e.accepted = accepted
				results[w] = append(results[w], e)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	attempted := make(map[string]effect)
	accepted := 0
	for _, rs := range results {
		for _, e := range rs {
			attempted[e.label] = e
			if e.accepted {
				accepted++
			}
		}
	}
	rows, err := testDB.QueryContext(ctx, `SELECT part, token, label FROM `+effects+` ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	last := map[epoch.Partition]epoch.Token{}
	counts := map[epoch.Partition]int{}
	stored := 0
	for rows.Next() {
		var (
			p     epoch.Partition
			tok   epoch.Token
			label string
		)
		if err := rows.Scan(&p, &tok, &label); err != nil {
			t.Fatal(err)
		}
		e, ok := attempted[label]
		switch {
		case !ok:
			t.Errorf("unexpected effect %q", label)
		case !e.accepted:
			t.Errorf("rejected effect %q (token %v) was applied", label, e.token)
		case e.partition != p || e.token != tok:
			t.Errorf("effect %q stored as partition %d token %v, written as %d %v", label, p, tok, e.partition, e.token)
		default:
			stored++
		}
		if tok < last[p] {
			t.Errorf("partition %d: token %v committed after %v", p, tok, last[p])
		}
		last[p] = max(last[p], tok)
		counts[p]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if stored != accepted {
		t.Errorf("%d effects stored, %d accepted", stored, accepted)
	}
	for p := range epoch.Partition(partitions) {
		wantCurrent(t, f, p, last[p])
		t.Logf("partition %d: %d accepted, final token %v", p, counts[p], last[p])
	}
}

// TestModel checks the fence against a naive model (a map of the largest
// admitted token per partition) over random sequences of guarded writes,
// admits and reads, with tokens drawn from the whole int64 range: the model
// refuses zero and negative tokens with ErrNoToken, writing nothing, and
// otherwise admits a token unless it is below the largest one admitted. Each
// run uses partitions of its own in one shared table.
func TestModel(t *testing.T) {
	f, _ := newFence(t, "model")
	effects := newEffects(t, "model")
	ctx := testenv.Context(t)
	tokenGen := rapid.OneOf(
		rapid.Int64Range(-2, 8),
		rapid.SampledFrom([]int64{math.MinInt64, -1, math.MaxInt64}),
		rapid.Int64(),
	)
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		base := epoch.Partition(run * 10)
		model := fencetest.Model{}
		var applied []string
		steps := rapid.IntRange(1, 12).Draw(rt, "steps")
		for i := range steps {
			p := base + epoch.Partition(rapid.IntRange(0, 2).Draw(rt, "partition"))
			op := rapid.SampledFrom([]string{"current", "admit", "do"}).Draw(rt, "op")
			if op == "current" {
				got, err := f.Current(ctx, p)
				if err != nil || got != model[p] {
					rt.Fatalf("Current(%d) = %v, %v; model %v", p, got, err, model[p])
				}
				continue
			}
			tok := epoch.Token(tokenGen.Draw(rt, "token"))
			label := fmt.Sprintf("%d/%d", run, i)
			var err error
			if op == "admit" {
				err = f.Admit(ctx, p, tok)
			} else {
				err = f.Do(ctx, p, tok, recordEffect(effects, p, tok, label))
			}
			admitted, want := model.Check(p, tok, err)
			if want != "" {
				rt.Fatalf("%s(%d, %v) = %v, want %s", op, p, tok, err, want)
			}
			if admitted && op == "do" {
				applied = append(applied, label)
			}
		}
		var got []string
		rows, err := testDB.QueryContext(ctx, `SELECT label FROM `+effects+` WHERE label LIKE $1 ORDER BY seq`, itoa(run)+"/%")
		if err != nil {
			rt.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var l string
			if err := rows.Scan(&l); err != nil {
				rt.Fatal(err)
			}
			got = append(got, l)
		}
		if err := rows.Err(); err != nil {
			rt.Fatal(err)
		}
		if strings.Join(got, ",") != strings.Join(applied, ",") {
			rt.Fatalf("effects %q, model %q", got, applied)
		}
	})
}

// TestTableNames checks which names New accepts, and that quoting makes
// accepted ones, reserved words and mixed case included, mean what they say
// on the server.
func TestTableNames(t *testing.T) {
	bad := []string{
		"", ".", "a.", ".a", "a.b.c", "1abc", "a-b", "a b", "a;drop table x", `a"b`, "a'b",
		"tränen", "a\x00", strings.Repeat("a", 64), "public." + strings.Repeat("a", 64),
	}
	for _, name := range bad {
		if f, err := sqlfence.New(&sql.DB{}, name); !errors.Is(err, sqlfence.ErrTableName) || f != nil {
			t.Errorf("New(%q) = %v, %v; want ErrTableName", name, f, err)
		}
	}
	if _, err := sqlfence.New(nil, "fence"); err == nil {
		t.Error("New(nil db) accepted")
	}
	for _, name := range []string{"_x", "Fence_1", strings.Repeat("a", 63), "public.fence"} {
		if _, err := sqlfence.New(&sql.DB{}, name); err != nil {
			t.Errorf("New(%q) = %v", name, err)
		}
	}

	// Reserved words and names differing only in case, in a schema of this
	// test's own.
	db := needDB(t)
	ctx := testenv.Context(t)
	schema := fmt.Sprintf("sqlfence_names_%d_%d", os.Getpid(), tableSeq.Add(1))
	if _, err := db.ExecContext(ctx, `CREATE SCHEMA `+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, `DROP SCHEMA `+schema+` CASCADE`); err != nil {
			t.Errorf("drop schema: %v", err)
		}
	})
	names := []string{"select", "user", "Mixed", "mixed"}
	for i, name := range names {
		f, err := sqlfence.New(db, schema+"."+name)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // IF NOT EXISTS
			if err := f.CreateTable(ctx); err != nil {
				t.Fatalf("%s: CreateTable: %v", name, err)
			}
		}
		if err := f.Admit(ctx, 0, epoch.Token(10*(i+1))); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	for i, name := range names {
		f, _ := sqlfence.New(db, schema+"."+name)
		wantCurrent(t, f, 0, epoch.Token(10*(i+1)))
	}
}

// TestAttacks runs the attack table (fencetest.Attacks): every write goes
// through Do with an effect, a row of its own, and a refused one must
// write neither its effect nor its token.
func TestAttacks(t *testing.T) {
	db := needDB(t)
	fencetest.Attacks(t, func(t *testing.T, v *epoch.Verifier) fencetest.Target {
		ctx := testenv.Context(t)
		plain, table := newFence(t, "attacks")
		f, err := sqlfence.New(db, table, sqlfence.WithVerifier(v))
		if err != nil {
			t.Fatal(err)
		}
		effects := newEffects(t, "attacks")
		n := 0
		effect := func(p epoch.Partition, tok epoch.Token) func(context.Context, *sql.Tx) error {
			n++
			return recordEffect(effects, p, tok, "w"+itoa(n))
		}
		return fencetest.Target{
			Admit: func(p epoch.Partition, tok epoch.Token) error { return f.Do(ctx, p, tok, effect(p, tok)) },
			AdmitSigned: func(p epoch.Partition, st epoch.SignedToken) error {
				return f.DoSigned(ctx, p, st, effect(p, st.Token))
			},
			Current: func(p epoch.Partition) epoch.Token {
				cur, err := plain.Current(ctx, p)
				if err != nil {
					t.Fatal(err)
				}
				return cur
			},
			Effects: func() int { return len(labels(t, effects)) },
		}
	})
}

// TestAttacksAdmit runs the attack table through the fence's other two
// entries, Admit and AdmitTx (in a transaction the test manages, rolled
// back when the fence refuses).
func TestAttacksAdmit(t *testing.T) {
	db := needDB(t)
	for _, viaTx := range []bool{false, true} {
		t.Run(map[bool]string{false: "Admit", true: "AdmitTx"}[viaTx], func(t *testing.T) {
			fencetest.Attacks(t, func(t *testing.T, v *epoch.Verifier) fencetest.Target {
				ctx := testenv.Context(t)
				plain, table := newFence(t, "attacksadmit")
				f, err := sqlfence.New(db, table, sqlfence.WithVerifier(v))
				if err != nil {
					t.Fatal(err)
				}
				inTx := func(admit func(tx *sql.Tx) error) error {
					tx, err := db.BeginTx(ctx, nil)
					if err != nil {
						return err
					}
					if err := admit(tx); err != nil {
						tx.Rollback()
						return err
					}
					return tx.Commit()
				}
				return fencetest.Target{
					Admit: func(p epoch.Partition, tok epoch.Token) error {
						if viaTx {
							return inTx(func(tx *sql.Tx) error { return f.AdmitTx(ctx, tx, p, tok) })
						}
						return f.Admit(ctx, p, tok)
					},
					AdmitSigned: func(p epoch.Partition, st epoch.SignedToken) error {
						if viaTx {
							return inTx(func(tx *sql.Tx) error { return f.AdmitTxSigned(ctx, tx, p, st) })
						}
						return f.AdmitSigned(ctx, p, st)
					},
					Current: func(p epoch.Partition) epoch.Token {
						cur, err := plain.Current(ctx, p)
						if err != nil {
							t.Fatal(err)
						}
						return cur
					},
				}
			})
		})
	}
}
