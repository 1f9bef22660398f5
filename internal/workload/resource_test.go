package workload_test

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tenure-dev/tenure/epoch"
	"github.com/tenure-dev/tenure/internal/testenv"
	"github.com/tenure-dev/tenure/internal/workload"
)

var seq atomic.Int64

// newEtcd returns an etcd resource under a prefix of its own.
func newEtcd(t *testing.T) workload.Resource {
	return workload.NewEtcdResource(etcd.Client(t), fmt.Sprintf("/test/%s/%d", t.Name(), seq.Add(1)))
}

// newUnfencedEtcd returns an unfenced etcd resource under a prefix of its
// own.
func newUnfencedEtcd(t *testing.T) workload.Resource {
	return workload.NewUnfencedEtcdResource(etcd.Client(t), fmt.Sprintf("/test/%s/%d", t.Name(), seq.Add(1)))
}

// newSQL returns a SQL resource on tables of its own, dropped when t ends.
func newSQL(t *testing.T) workload.Resource {
	return newSQLOn(t, sqlTable(t), workload.NewSQLResource)
}

// newUnfencedSQL returns an unfenced SQL resource on tables of its own.
func newUnfencedSQL(t *testing.T) workload.Resource {
	return newSQLOn(t, sqlTable(t), func(db *sql.DB, table string, _ ...workload.Option) (*workload.SQLResource, error) {
		return workload.NewUnfencedSQLResource(db, table)
	})
}

// sqlTable names a records table of t's own, dropped (with its tokens
// table) when t ends.
func sqlTable(t *testing.T) string {
	db := needDB(t)
	table := fmt.Sprintf("workload_test_%d_%d", os.Getpid(), seq.Add(1))
	t.Cleanup(func() {
		for _, tb := range []string{table, table + "_tokens"} {
			if _, err := db.ExecContext(context.Background(), `DROP TABLE IF EXISTS "`+tb+`"`); err != nil {
				t.Errorf("drop %s: %v", tb, err)
			}
		}
	})
	return table
}

func newSQLOn(t *testing.T, table string, open func(*sql.DB, string, ...workload.Option) (*workload.SQLResource, error)) *workload.SQLResource {
	res, err := open(needDB(t), table)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.CreateTables(testenv.Context(t)); err != nil {
		t.Fatal(err)
	}
	return res
}

var resources = []struct {
	name string
	new  func(t *testing.T) workload.Resource
}{
	{"etcd", newEtcd},
	{"postgres", newSQL},
}

var unfencedResources = []struct {
	name     string
	fenced   func(t *testing.T) workload.Resource
	unfenced func(t *testing.T) workload.Resource
}{
	{"etcd", newEtcd, newUnfencedEtcd},
	{"postgres", newSQL, newUnfencedSQL},
}

// TestResourceFencing walks both resources through a hand-off: the old
// owner's appends are rejected once the new owner's token is admitted,
// with the newer token in the error, and leave nothing behind.
func TestResourceFencing(t *testing.T) {
	for _, rc := range resources {
		t.Run(rc.name, func(t *testing.T) {
			res := rc.new(t)
			ctx := testenv.Context(t)
			rec := func(p epoch.Partition, seq int64, tok epoch.Token, w string) workload.Record {
				return workload.Record{Partition: p, Seq: seq, Token: tok, Worker: w, Member: "m-" + w}
			}
			mustAppend := func(r workload.Record) {
				t.Helper()
				if err := res.Append(ctx, r, r.Unsigned()); err != nil {
					t.Fatalf("append %+v: %v", r, err)
				}
			}
			mustAppend(rec(1, 0, 3, "a"))
			mustAppend(rec(1, 0, 3, "a")) // a retry after an unknown outcome
			mustAppend(rec(1, 1, 3, "a"))
			if err := res.Admit(ctx, 1, epoch.SignedToken{Token: 5}); err != nil {
				t.Fatalf("admit 5: %v", err)
			}
			err := res.Append(ctx, rec(1, 2, 3, "a"), rec(1, 2, 3, "a").Unsigned())
			var se *epoch.StaleError
			if !errors.As(err, &se) || se.Token != 3 || se.Current != 5 || se.Partition != 1 {
				t.Fatalf("append under token 3 after 5 was admitted: %v, want a StaleError for 3 with current 5", err)
			}
			mustAppend(rec(1, 1, 5, "b")) // the new owner redoes record 1
			mustAppend(rec(1, 2, 5, "b"))
			mustAppend(rec(2, 0, 4, "a")) // partitions are fenced apart
			if err := res.Admit(ctx, 2, epoch.SignedToken{Token: 2}); !errors.Is(err, epoch.ErrStale) {
				t.Fatalf("admit 2 after 4: %v, want ErrStale", err)
			}
			if err := res.Append(ctx, rec(3, 0, 0, "a"), rec(3, 0, 0, "a").Unsigned()); !errors.Is(err, epoch.ErrNoToken) {
				t.Fatalf("append without a token: %v, want ErrNoToken", err)
			}

			got, err := res.Records(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want := []workload.Record{rec(1, 0, 3, "a"), rec(1, 1, 3, "a"), rec(1, 1, 5, "b"), rec(1, 2, 5, "b"), rec(2, 0, 4, "a")}
			if len(got) != len(want) {
				t.Fatalf("records %+v, want %+v", got, want)
			}
			for i := range want {
				if got[i].Record != want[i] {
					t.Errorf("record %d: %+v, want %+v", i, got[i].Record, want[i])
				}
				if i > 0 && got[i].Partition == got[i-1].Partition && got[i].Order <= got[i-1].Order {
					t.Errorf("record %d: order %d after %d", i, got[i].Order, got[i-1].Order)
				}
			}
		})
	}
}

// TestResourceConcurrentOwners has owners with tokens 1..8 append to one
// partition at once, as overlapping owners of a partition do when
// ownership moves under load. In the order the resource accepted them,
// tokens never go down; every accepted record is stored, and no rejected
// one is.
func TestResourceConcurrentOwners(t *testing.T) {
	const owners, perOwner = 8, 15
	for _, rc := range resources {
		t.Run(rc.name, func(t *testing.T) {
			res := rc.new(t)
			ctx := testenv.Context(t)
			var mu sync.Mutex
			accepted := map[workload.Record]bool{}
			var wg sync.WaitGroup
			for tok := epoch.Token(1); tok <= owners; tok++ {
				wg.Go(func() {
					for i := range perOwner {
						r := workload.Record{Partition: 7, Seq: int64(i), Token: tok, Worker: fmt.Sprint("w", tok), Member: fmt.Sprint("m", tok)}
						err := res.Append(ctx, r, r.Unsigned())
						switch {
						case err == nil:
							mu.Lock()
							accepted[r] = true
							mu.Unlock()
						case errors.Is(err, epoch.ErrStale):
							return // fenced for good
						default:
							t.Errorf("append %+v: %v", r, err)
							return
						}
					}
				})
			}
			wg.Wait()
			got, err := res.Records(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(accepted) {
				t.Errorf("%d records stored, %d accepted", len(got), len(accepted))
			}
			for i, s := range got {
				if !accepted[s.Record] {
					t.Errorf("stored record %+v was not accepted", s.Record)
				}
				if i > 0 && s.Token < got[i-1].Token {
					t.Errorf("token %v accepted after %v", s.Token, got[i-1].Token)
				}
			}
			if len(accepted) == 0 || !accepted[workload.Record{Partition: 7, Seq: perOwner - 1, Token: owners, Worker: fmt.Sprint("w", owners), Member: fmt.Sprint("m", owners)}] {
				t.Errorf("the newest owner did not write all its records")
			}
		})
	}
}

func TestSQLTableNames(t *testing.T) {
	for _, name := range []string{"records", "demo.records", "Records_2", "_x"} {
		if err := workload.CheckTable(name); err != nil {
			t.Errorf("CheckTable(%q): %v", name, err)
		}
	}
	long := "t234567890123456789012345678901234567890123456789012345678" // 58 bytes: +_tokens is 65
	for _, name := range []string{"", "a.b.c", "1records", "re-cords", `x"; DROP TABLE y; --`, long} {
		if err := workload.CheckTable(name); !errors.Is(err, workload.ErrTableName) {
			t.Errorf("CheckTable(%q): %v, want ErrTableName", name, err)
		}
		if _, err := workload.NewSQLResource(nil, name); !errors.Is(err, workload.ErrTableName) {
			t.Errorf("NewSQLResource(%q): %v, want ErrTableName", name, err)
		}
	}
}

// TestUnfencedResource is the control of the fencing tests: the same
// hand-off, where the fenced resource rejects the former owner's late
// write and stores nothing of it, and the unfenced one stores it, after
// the new owner's records, so that a reader sees the token go down.
func TestUnfencedResource(t *testing.T) {
	for _, rc := range unfencedResources {
		t.Run(rc.name, func(t *testing.T) {
			for _, fenced := range []bool{true, false} {
				t.Run(fmt.Sprintf("fenced=%v", fenced), func(t *testing.T) {
					res := rc.unfenced(t)
					if fenced {
						res = rc.fenced(t)
					}
					ctx := testenv.Context(t)
					old := workload.Record{Partition: 4, Seq: 0, Token: 3, Worker: "a", Member: "ma"}
					newer := workload.Record{Partition: 4, Seq: 0, Token: 5, Worker: "b", Member: "mb"}
					late := workload.Record{Partition: 4, Seq: 1, Token: 3, Worker: "a", Member: "ma"}
					if err := res.Append(ctx, old, old.Unsigned()); err != nil {
						t.Fatal(err)
					}
					if err := res.Admit(ctx, 4, epoch.SignedToken{Token: 5}); err != nil {
						t.Fatal(err)
					}
					if err := res.Append(ctx, newer, newer.Unsigned()); err != nil {
						t.Fatal(err)
					}
					err := res.Append(ctx, late, late.Unsigned())
					want := []workload.Record{old, newer}
					if fenced {
						if !errors.Is(err, epoch.ErrStale) {
							t.Fatalf("late write under token 3 after 5: %v, want ErrStale", err)
						}
					} else {
						if err != nil {
							t.Fatalf("late write, unfenced: %v, want accepted", err)
						}
						if err := res.Admit(ctx, 4, epoch.SignedToken{Token: 2}); err != nil {
							t.Errorf("admit of an older token, unfenced: %v, want accepted", err)
						}
						want = append(want, late)
					}
					got, err := res.Records(ctx)
					if err != nil {
						t.Fatal(err)
					}
					if len(got) != len(want) {
						t.Fatalf("records %+v, want %+v", got, want)
					}
					for i := range want {
						if got[i].Record != want[i] {
							t.Errorf("record %d: %+v, want %+v", i, got[i].Record, want[i])
						}
					}
				})
			}
		})
	}
}

// TestSQLAddsMemberColumn opens a records table made by a version without
// the member column: CreateTables adds it, the old rows read with an empty
// member, and new ones keep theirs. A second CreateTables changes nothing.
func TestSQLAddsMemberColumn(t *testing.T) {
	db := needDB(t)
	ctx := testenv.Context(t)
	table := sqlTable(t)
	// The table as the previous version created it.
	if _, err := db.ExecContext(ctx, `CREATE TABLE "`+table+`" (`+
		`"id" bigserial PRIMARY KEY, "partition" integer NOT NULL, "seq" bigint NOT NULL, `+
		`"token" bigint NOT NULL, "worker" text NOT NULL, "written" timestamptz NOT NULL DEFAULT now(), `+
		`UNIQUE ("partition", "seq", "token"))`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO "`+table+`" ("partition", "seq", "token", "worker") VALUES (1, 0, 2, 'old')`); err != nil {
		t.Fatal(err)
	}
	res := newSQLOn(t, table, workload.NewSQLResource)
	if err := res.CreateTables(ctx); err != nil {
		t.Fatalf("second CreateTables: %v", err)
	}
	rec := workload.Record{Partition: 1, Seq: 1, Token: 2, Worker: "new", Member: "m-new"}
	if err := res.Append(ctx, rec, rec.Unsigned()); err != nil {
		t.Fatal(err)
	}
	got, err := res.Records(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []workload.Record{{Partition: 1, Seq: 0, Token: 2, Worker: "old"}, rec}
	if len(got) != len(want) || got[0].Record != want[0] || got[1].Record != want[1] {
		t.Errorf("records %+v, want %+v", got, want)
	}
}

// TestResourceVerify: a resource built with a verifier appends a record
// under a token the coordinator signed for its partition, and refuses,
// writing nothing, an unsigned token, a token signed for another
// partition and a tampered one; a token that is not the record's is
// refused before anything.
func TestResourceVerify(t *testing.T) {
	seed := make([]byte, ed25519.SeedSize)
	signer, err := epoch.NewSigner(seed)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := epoch.NewKeySet([]epoch.PublicKey{{ID: signer.ID(), Key: signer.Public(), State: epoch.KeyActive}})
	if err != nil {
		t.Fatal(err)
	}
	topic := [16]byte{1}
	v := epoch.NewVerifier(epoch.VerifierConfig{Group: "g", TopicID: topic, Keys: keys, RequireSigned: true})
	grant := func(p epoch.Partition, tok epoch.Token) epoch.SignedToken {
		return signer.Sign(epoch.Grant{Group: "g", TopicID: topic, Partition: p, Token: tok, Member: "m"})
	}
	for _, rc := range []struct {
		name string
		new  func(t *testing.T) workload.Resource
	}{
		{"etcd", func(t *testing.T) workload.Resource {
			return workload.NewEtcdResource(etcd.Client(t), fmt.Sprintf("/test/%s/%d", t.Name(), seq.Add(1)), workload.Verify(v))
		}},
		{"postgres", func(t *testing.T) workload.Resource {
			return newSQLOn(t, sqlTable(t), func(db *sql.DB, table string, _ ...workload.Option) (*workload.SQLResource, error) {
				return workload.NewSQLResource(db, table, workload.Verify(v))
			})
		}},
	} {
		t.Run(rc.name, func(t *testing.T) {
			res := rc.new(t)
			ctx := testenv.Context(t)
			rec := workload.Record{Partition: 2, Seq: 0, Token: 5, Worker: "w", Member: "m"}
			tampered := grant(2, 5)
			tampered.Sig = tampered.Sig[:63] + "x"
			for name, tok := range map[string]epoch.SignedToken{
				"unsigned":        rec.Unsigned(),
				"other partition": grant(3, 5),
				"tampered":        tampered,
			} {
				if err := res.Append(ctx, rec, tok); !errors.Is(err, epoch.ErrUnverified) {
					t.Errorf("%s: %v, want ErrUnverified", name, err)
				}
				if err := res.Admit(ctx, 2, tok); !errors.Is(err, epoch.ErrUnverified) {
					t.Errorf("admit %s: %v, want ErrUnverified", name, err)
				}
			}
			if err := res.Append(ctx, rec, grant(2, 6)); !errors.Is(err, workload.ErrTokenMismatch) {
				t.Errorf("another token than the record's: %v", err)
			}
			if got, err := res.Records(ctx); err != nil || len(got) != 0 {
				t.Fatalf("after the refusals the resource holds %v, %v", got, err)
			}
			if err := res.Append(ctx, rec, grant(2, 5)); err != nil {
				t.Fatalf("the signed record: %v", err)
			}
			if got, err := res.Records(ctx); err != nil || len(got) != 1 || got[0].Record != rec {
				t.Fatalf("the resource holds %v, %v; want the signed record", got, err)
			}
		})
	}
}
