package workload_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/tenure-dev/tenure/epoch"
	"github.com/tenure-dev/tenure/internal/testenv"
	"github.com/tenure-dev/tenure/internal/workload"
)

// TestFanout writes through a fan-out over two real resources (PostgreSQL
// then etcd, as `tenure worker --resource postgres,etcd` does; two etcd
// prefixes when there is no PostgreSQL), each logged on one attempt log:
// every record lands in both, with one attempt line per resource, in
// order. A stale rejection by the second resource is the fan-out's, and
// leaves the record in the first only; one by the first does not reach
// the second.
func TestFanout(t *testing.T) {
	for _, tc := range []struct {
		name        string
		first, then func(t *testing.T) workload.Resource
		names       [2]string
	}{
		{"postgres,etcd", newSQL, newEtcd, [2]string{"postgres", "etcd"}},
		{"etcd,etcd", newEtcd, newEtcd, [2]string{"etcd1", "etcd2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testenv.Context(t)
			first, second := tc.first(t), tc.then(t)
			var buf bytes.Buffer
			log := workload.NewAttemptLog(&buf)
			fan, err := workload.NewFanout(workload.LogAttempts(tc.names[0], first, log), workload.LogAttempts(tc.names[1], second, log))
			if err != nil {
				t.Fatal(err)
			}
			rec := func(seq int64, tok epoch.Token) workload.Record {
				return workload.Record{Partition: 2, Seq: seq, Token: tok, Worker: "w", Member: "m"}
			}
			if err := fan.Admit(ctx, 2, epoch.SignedToken{Token: 4}); err != nil {
				t.Fatal(err)
			}
			if err := fan.Append(ctx, rec(0, 4), rec(0, 4).Unsigned()); err != nil {
				t.Fatal(err)
			}

			// Only the second resource has seen token 6: the fan-out is
			// rejected, after the first took the record.
			if err := second.Admit(ctx, 2, epoch.SignedToken{Token: 6}); err != nil {
				t.Fatal(err)
			}
			err = fan.Append(ctx, rec(1, 4), rec(1, 4).Unsigned())
			if se, ok := errors.AsType[*epoch.StaleError](err); !ok || se.Current != 6 {
				t.Fatalf("append rejected by the second resource: %v, want a StaleError with current 6", err)
			}
			// Now the first rejects, and the second is not tried.
			if err := first.Admit(ctx, 2, epoch.SignedToken{Token: 8}); err != nil {
				t.Fatal(err)
			}
			if err := fan.Append(ctx, rec(2, 7), rec(2, 7).Unsigned()); !errors.Is(err, epoch.ErrStale) {
				t.Fatalf("append rejected by the first resource: %v, want ErrStale", err)
			}

			check := func(r workload.Resource, want ...workload.Record) {
				t.Helper()
				got, err := r.Records(ctx)
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
			}
			check(first, rec(0, 4), rec(1, 4))
			check(second, rec(0, 4))
			check(fan, rec(0, 4), rec(1, 4)) // the first resource's

			lines, err := workload.ReadAttempts(&buf)
			if err != nil {
				t.Fatal(err)
			}
			type line struct {
				op       workload.Op
				resource string
				seq      int64
				outcome  workload.Outcome
			}
			want := []line{
				{workload.OpAdmit, tc.names[0], 0, workload.OutcomeOK},
				{workload.OpAdmit, tc.names[1], 0, workload.OutcomeOK},
				{workload.OpAppend, tc.names[0], 0, workload.OutcomeOK},
				{workload.OpAppend, tc.names[1], 0, workload.OutcomeOK},
				{workload.OpAppend, tc.names[0], 1, workload.OutcomeOK},
				{workload.OpAppend, tc.names[1], 1, workload.OutcomeStale},
				{workload.OpAppend, tc.names[0], 2, workload.OutcomeStale},
			}
			if len(lines) != len(want) {
				t.Fatalf("%d attempt lines, want %d: %+v", len(lines), len(want), lines)
			}
			for i, a := range lines {
				if got := (line{a.Op, a.Resource, a.Seq, a.Outcome}); got != want[i] {
					t.Errorf("line %d: %+v, want %+v", i, got, want[i])
				}
				if a.Partition != 2 || a.T0.IsZero() || a.T1.Before(a.T0) {
					t.Errorf("line %d: %+v", i, a)
				}
				if a.Op == workload.OpAppend && (a.Worker != "w" || a.Member != "m") {
					t.Errorf("line %d names worker %q member %q, want the record's", i, a.Worker, a.Member)
				}
				if (a.Outcome == workload.OutcomeStale) != (a.Err != "") {
					t.Errorf("line %d: outcome %s with err %q", i, a.Outcome, a.Err)
				}
			}
		})
	}
}

func TestFanoutNeedsResources(t *testing.T) {
	if _, err := workload.NewFanout(); err == nil {
		t.Error("a fan-out to nothing was accepted")
	}
	if _, err := workload.NewFanout(nil); err == nil {
		t.Error("a fan-out to a nil resource was accepted")
	}
}
