package check

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// kinds lists the distinct kinds of r's violations, sorted.
func kinds(r *Report) []Kind {
	var ks []Kind
	for _, v := range r.Violations {
		if !slices.Contains(ks, v.Kind) {
			ks = append(ks, v.Kind)
		}
	}
	slices.Sort(ks)
	return ks
}

func mustCheck(t *testing.T, in *Input, opts Options) *Report {
	t.Helper()
	r, err := Check(in, opts)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	return r
}

func describe(r *Report) string {
	var b bytes.Buffer
	_ = r.WriteText(&b)
	return b.String()
}

// TestChecks runs each check on the baseline with one thing changed: the
// clean variants must pass, the others must raise exactly the kinds they
// name.
func TestChecks(t *testing.T) {
	const s = time.Second
	noZombie := func(b *builder) {}
	for _, tc := range []struct {
		name string
		h    hooks
		edit func(in *Input)
		end  time.Duration // observation end; default 40 s
		want []Kind
	}{
		{name: "clean/baseline"},
		{
			name: "clean/the observation starts long before the group",
			edit: func(in *Input) {
				var early []RevTime
				for i := 600; i > 0; i-- {
					early = append(early, RevTime{Rev: 0, T: in.RevTimes[0].T.Add(-time.Duration(i) * 100 * time.Millisecond)})
				}
				in.RevTimes = append(early, in.RevTimes...)
			},
		},
		{
			name: "no-owner/the group never appears",
			edit: func(in *Input) { in.History = nil },
			want: []Kind{Unauthorised, NoOwner},
		},
		{
			name: "clean/zombie write decided before the hand-off lands before the new owner's admit",
			h: hooks{handoff: func(b *builder) {
				b.op(Attempt{Op: OpAppend, Worker: "wa", Member: "A", Partition: 0, Token: 1, Seq: 3, Resource: ResourceEtcd, Outcome: OutcomeOK, Held: true})
				b.row(ResourceEtcd, 0, 3, 1, "wa", "A")
			}, zombie: noZombie},
		},
		{
			name: "clean/provisional token re-fixed within one ownership",
			h: hooks{end: func(b *builder) {
				b.assign("B", 3, map[int32]int64{0: 3, 1: 2})
				b.admit(ResourceEtcd, 0, 3, "wb", "B", OutcomeOK)
				b.appendOK(ResourceEtcd, 0, 5, 3, "wb", "B")
				b.at(31 * s)
				b.appendOK(ResourceEtcd, 0, 6, 3, "wb", "B")
			}},
		},
		{
			name: "clean/a commit of unknown outcome that took effect",
			h: hooks{end: func(b *builder) {
				b.consumerOp("c2", 1, KindCommit, 11, OffsetError)
				b.offset(1, 11, 2, "B")
				b.at(31 * s)
				b.consumerOp("c2", 1, KindFetch, 11, OffsetOK)
			}},
		},
		{
			name: "clean/a commit of unknown outcome that did not, and a refused one",
			h: hooks{end: func(b *builder) {
				b.consumerOp("c2", 1, KindCommit, 11, OffsetError)
				b.consumerOp("c1", 1, KindCommit, 12, OffsetRefused)
				b.at(31 * s)
				b.consumerOp("c2", 1, KindFetch, 9, OffsetOK)
			}},
		},
		{
			name: "clean/a commit answered COORDINATOR_NOT_AVAILABLE that landed",
			h: hooks{end: func(b *builder) {
				b.consumerOp("c2", 1, KindCommit, 11, OffsetRefused)
				b.in.Offsets[len(b.in.Offsets)-1].Err = "COORDINATOR_NOT_AVAILABLE: The coordinator is not available."
				b.offset(1, 11, 2, "B")
				b.at(31 * s)
				b.consumerOp("c2", 1, KindFetch, 11, OffsetOK)
			}},
		},
		{
			name: "clean/offset moved back by its owner",
			h:    hooks{end: func(b *builder) { b.offset(0, 4, 2, "B") }},
		},
		{
			name: "clean/offset moved back by the last owner in the hand-off",
			h:    hooks{handoff: func(b *builder) { b.offset(0, 2, 1, "A") }},
		},
		{
			name: "clean/no owner while a fault that never heals is active",
			h: hooks{end: func(b *builder) {
				b.leave("B")
				b.fault("partition", "coordinator", 29*s, 0)
			}},
			end: 90 * s,
		},
		{
			name: "clean/owner back within the bound of the heal",
			h: hooks{end: func(b *builder) {
				b.leave("B")
				b.fault("quorum-loss", "etcd", 29*s, 50*s)
				b.at(60 * s)
				b.tx(func() {
					b.group(3)
					b.member("B")
					b.assign("B", 3, map[int32]int64{0: 3, 1: 3})
				})
			}},
			end: 90 * s,
		},
		{
			name: "token-order/a stale write accepted after the new owner's rows",
			h: hooks{zombie: func(b *builder) {}, end: func(b *builder) {
				b.op(Attempt{Op: OpAppend, Worker: "wa", Member: "A", Partition: 0, Token: 1, Seq: 3, Resource: ResourceEtcd, Outcome: OutcomeOK, Held: true})
				b.row(ResourceEtcd, 0, 3, 1, "wa", "A")
			}},
			want: []Kind{TokenOrder},
		},
		{
			name: "token-order/an acknowledged append below an acknowledged admit, row never read",
			h: hooks{zombie: func(b *builder) {
				b.op(Attempt{Op: OpAppend, Worker: "wa", Member: "A", Partition: 0, Token: 1, Seq: 3, Resource: ResourceEtcd, Outcome: OutcomeOK, Held: true})
			}},
			// Its row is missing too: also a lost write.
			want: []Kind{TokenOrder, LostWrite},
		},
		{
			name: "unauthorised/a row at a token never granted",
			h:    hooks{end: func(b *builder) { b.appendOK(ResourceEtcd, 0, 5, 7, "wb", "B") }},
			want: []Kind{Unauthorised},
		},
		{
			name: "unauthorised/a row by a member that never held the partition",
			h:    hooks{end: func(b *builder) { b.appendOK(ResourcePostgres, 1, 0, 2, "wc", "C") }},
			want: []Kind{Unauthorised},
		},
		{
			name: "unauthorised/a row naming no member, from a worker whose members never held it",
			h: hooks{end: func(b *builder) {
				b.in.Attempts = append(b.in.Attempts, Attempt{Op: OpClaim, T: b.now, Worker: "wc", Member: "C", Partition: 0})
				b.appendOK(ResourcePostgres, 1, 0, 2, "wc", "")
			}},
			want: []Kind{Unauthorised},
		},
		{
			name: "clean/a row naming no member, from a worker that logged nothing, at a granted token",
			edit: func(in *Input) {
				in.Rows = append(in.Rows, Row{Resource: ResourcePostgres, Partition: 1, Seq: 0, Token: 2, Worker: "wx", Order: 1})
			},
		},
		{
			name: "unauthorised/a row naming no member, from a worker that logged nothing, at a token never granted",
			edit: func(in *Input) {
				in.Rows = append(in.Rows, Row{Resource: ResourcePostgres, Partition: 1, Seq: 0, Token: 5, Worker: "wx", Order: 1})
			},
			want: []Kind{Unauthorised},
		},
		{
			name: "unauthorised/an admit at a token never granted",
			h:    hooks{end: func(b *builder) { b.admit(ResourceEtcd, 1, 9, "wb", "B", OutcomeOK) }},
			want: []Kind{Unauthorised},
		},
		{
			name: "two-owners/a partition given before its owner left",
			h:    hooks{beforeLeave: func(b *builder) { b.assign("B", 2, map[int32]int64{0: 2}) }},
			want: []Kind{TwoOwners},
		},
		{
			name: "grant-order/a token re-fixed at the earlier owner's",
			h:    hooks{end: func(b *builder) { b.assign("B", 2, map[int32]int64{0: 1, 1: 2}) }},
			want: []Kind{GrantOrder},
		},
		{
			name: "lost-write/an acknowledged row missing",
			edit: func(in *Input) { in.Rows = dropRow(in.Rows, ResourceEtcd, 0, 1, 1) },
			want: []Kind{LostWrite, SeqGap},
		},
		{
			name: "lost-write/the row is another member's",
			edit: func(in *Input) {
				i := slices.IndexFunc(in.Rows, func(r Row) bool { return r.Seq == 4 && r.Token == 2 })
				in.Rows[i].Member, in.Rows[i].Worker = "C", "wc"
			},
			want: []Kind{Unauthorised, LostWrite},
		},
		{
			name: "seq-gap/a hole in one ownership's sequence numbers",
			edit: func(in *Input) {
				in.Rows = dropRow(in.Rows, ResourceEtcd, 0, 1, 1)
				in.Attempts = slices.DeleteFunc(in.Attempts, func(a Attempt) bool { return a.Op == OpAppend && a.Seq == 1 && a.Token == 1 })
			},
			want: []Kind{SeqGap},
		},
		{
			name: "not-linearizable/a fetch reads an overwritten offset",
			h:    hooks{end: func(b *builder) { b.consumerOp("c1", 1, KindFetch, 7, OffsetOK) }},
			want: []Kind{NotLinearizable},
		},
		{
			name: "not-linearizable/a fetch reads an offset nobody committed",
			h:    hooks{end: func(b *builder) { b.fetch(0, 4, "wb", "B") }},
			want: []Kind{NotLinearizable},
		},
		{
			name: "not-linearizable/an acknowledged commit lost",
			h: hooks{end: func(b *builder) {
				b.commit(0, 6, 2, "wb", "B", OutcomeOK)
				b.at(31 * s)
				b.fetch(0, 5, "wb", "B")
			}},
			want: []Kind{NotLinearizable},
		},
		{
			name: "not-linearizable/a commit refused as stale is read",
			h: hooks{end: func(b *builder) {
				b.consumerOp("c1", 1, KindCommit, 11, OffsetRefused)
				b.in.Offsets[len(b.in.Offsets)-1].Err = "STALE_MEMBER_EPOCH: The member epoch is stale."
				b.at(31 * s)
				b.consumerOp("c2", 1, KindFetch, 11, OffsetOK)
			}},
			want: []Kind{NotLinearizable},
		},
		{
			name: "not-linearizable/a pending commit ended refused as stale is read",
			h: hooks{end: func(b *builder) {
				b.consumerOp("c1", 1, KindCommit, 11, OffsetPending)
				b.consumerOp("c1", 1, KindCommit, 11, OffsetRefused)
				b.in.Offsets[len(b.in.Offsets)-1].Err = "STALE_MEMBER_EPOCH: The member epoch is stale."
				b.at(31 * s)
				b.consumerOp("c2", 1, KindFetch, 11, OffsetOK)
			}},
			want: []Kind{NotLinearizable},
		},
		{
			name: "ok/a consumer killed after logging its commit pending: the commit may have landed",
			h: hooks{end: func(b *builder) {
				b.consumerOp("c1", 1, KindCommit, 11, OffsetPending)
				b.at(31 * s)
				b.consumerOp("c2", 1, KindFetch, 11, OffsetOK)
			}},
		},
		{
			name: "ok/a worker killed after logging its commit pending: the commit may have landed",
			h: hooks{end: func(b *builder) {
				b.commit(0, 6, 2, "wb", "B", OutcomePending)
				b.at(31 * s)
				b.fetch(0, 6, "wb", "B")
			}},
		},
		{
			name: "epoch-regression/the group epoch goes back",
			h:    hooks{end: func(b *builder) { b.group(1) }},
			want: []Kind{EpochRegression},
		},
		{
			name: "epoch-regression/the tombstone's epoch goes back",
			h:    hooks{end: func(b *builder) { b.tombstone(1) }},
			end:  90 * s,
			want: []Kind{EpochRegression, NoOwner},
		},
		{
			name: "offset-regression/an offset moved back by a former owner",
			h:    hooks{end: func(b *builder) { b.offset(0, 2, 1, "A") }},
			want: []Kind{OffsetRegression},
		},
		{
			name: "offset-regression/an offset moved back by the owner at another token",
			h:    hooks{end: func(b *builder) { b.offset(0, 2, 1, "B") }},
			want: []Kind{OffsetRegression},
		},
		{
			name: "offset-regression/an admin commit moves an offset back",
			h:    hooks{end: func(b *builder) { b.offset(1, 0, 0, "") }},
			want: []Kind{OffsetRegression},
		},
		{
			name: "no-owner/no owner long after the last heal",
			h:    hooks{end: func(b *builder) { b.leave("B") }},
			end:  90 * s,
			want: []Kind{NoOwner},
		},
		{
			name: "no-owner/the run ends before the bound",
			h:    hooks{end: func(b *builder) { b.leave("B") }},
			want: []Kind{NoOwner},
		},
		{
			name: "no-owner/the owner comes back too late after the heal",
			h: hooks{end: func(b *builder) {
				b.leave("B")
				b.fault("quorum-loss", "etcd", 29*s, 35*s)
				b.at(70 * s)
				b.tx(func() {
					b.group(3)
					b.member("B")
					b.assign("B", 3, map[int32]int64{0: 3, 1: 3})
				})
			}},
			end:  90 * s,
			want: []Kind{NoOwner},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := baseline(tc.h)
			end := tc.end
			if end == 0 {
				end = 40 * time.Second
			}
			in := b.build(end)
			if tc.edit != nil {
				tc.edit(in)
			}
			r := mustCheck(t, in, Options{})
			if got := kinds(r); !slices.Equal(got, tc.want) {
				t.Errorf("kinds %v, want %v\n%s", got, tc.want, describe(r))
			}
			if r.OK() != (len(tc.want) == 0) {
				t.Errorf("OK() = %v with %d violations", r.OK(), len(r.Violations))
			}
		})
	}
}

func dropRow(rows []Row, res string, p int32, seq, token int64) []Row {
	return slices.DeleteFunc(rows, func(r Row) bool {
		return r.Resource == res && r.Partition == p && r.Seq == seq && r.Token == token
	})
}

// TestControlRunFencingOff builds what a run with fencing switched off
// leaves: a worker paused across its expiry wakes up and its writes land
// after the new owner's, under its old token; the resource acknowledges
// every one of them. Check 1 must fire, on the rows' order and on the
// attempt logs.
func TestControlRunFencingOff(t *testing.T) {
	const s = time.Second
	b := baseline(hooks{zombie: func(b *builder) {
		b.fault("pause", "wa", 9*s, 19*s)
	}, end: func(b *builder) {
		for seq := int64(3); seq < 6; seq++ {
			b.at(30*s + time.Duration(seq)*200*time.Millisecond)
			b.op(Attempt{Op: OpAppend, Worker: "wa", Member: "A", Partition: 0, Token: 1, Seq: seq, Resource: ResourceEtcd, Outcome: OutcomeOK, Held: seq == 3})
			b.row(ResourceEtcd, 0, seq, 1, "wa", "A")
		}
	}})
	r := mustCheck(t, b.build(60*s), Options{})
	if r.OK() || !slices.Contains(kinds(r), TokenOrder) {
		t.Fatalf("fencing off must break check 1, got %v\n%s", kinds(r), describe(r))
	}
	var rowsV, attemptsV int
	for _, v := range r.Violations {
		if v.Kind != TokenOrder {
			t.Errorf("unexpected %v", v)
			continue
		}
		if strings.HasPrefix(v.Evidence, "row ") {
			rowsV++
		} else {
			attemptsV++
		}
	}
	if rowsV != 3 || attemptsV != 3 {
		t.Errorf("%d row violations and %d attempt violations, want 3 and 3\n%s", rowsV, attemptsV, describe(r))
	}
	text := describe(r)
	for _, want := range []string{"FAILED: 6 violations", "token-order: 6", "row seq 3 token 1 by A accepted at order 6, after token 2 (seq 3 by B, order 4)"} {
		if !strings.Contains(text, want) {
			t.Errorf("WriteText lacks %q:\n%s", want, text)
		}
	}
	if rs := r.Stats.Resources[0]; rs.Held != 1 || rs.HeldAccepted != 1 {
		t.Errorf("held %d (accepted %d), want 1 (1)", rs.Held, rs.HeldAccepted)
	}
}

// TestStats checks the baseline's counts and its recovery time: A's
// partitions had no owner from its expiry at 16 s to B's grant at 16.2 s,
// 4.2 s after the kill healed at 12 s.
func TestStats(t *testing.T) {
	r := mustCheck(t, baseline(hooks{}).build(40*time.Second), Options{})
	if !r.OK() {
		t.Fatalf("baseline: %s", describe(r))
	}
	st := r.Stats
	if want := []FaultCount{{"kill", 1}}; !slices.Equal(st.Faults, want) {
		t.Errorf("faults %v, want %v", st.Faults, want)
	}
	want := ResourceStats{Resource: ResourceEtcd, Appends: 6, Accepted: 5, Stale: 1, Held: 1, Admits: 2, Rows: 5}
	if len(st.Resources) != 1 || st.Resources[0] != want {
		t.Errorf("resources %+v, want %+v", st.Resources, want)
	}
	wantC := []CommitStats{
		{Source: "workers", Commits: 2, OK: 2, Fetches: 3, FetchesOK: 3},
		{Source: "consumers", Commits: 2, OK: 2, Fetches: 2, FetchesOK: 2},
	}
	if !slices.Equal(st.Commits, wantC) {
		t.Errorf("commits %+v, want %+v", st.Commits, wantC)
	}
	if len(st.Recoveries) != 1 || st.Recoveries[0].Took != 4200*time.Millisecond {
		t.Errorf("recoveries %+v, want one of 4.2s", st.Recoveries)
	}
	if st.Bound != 22*time.Second {
		t.Errorf("bound %v, want 22s", st.Bound)
	}
	// Two partitions unowned for 0.2 s after forming.
	if st.Unowned != 400*time.Millisecond {
		t.Errorf("unowned %v, want 400ms", st.Unowned)
	}
	if len(st.Linearizability) != 2 {
		t.Errorf("linearizability %+v, want two partitions", st.Linearizability)
	}
	for _, l := range st.Linearizability {
		if l.Result != "Ok" {
			t.Errorf("linearizability %+v", l)
		}
	}
	text := describe(r)
	for _, want := range []string{"OK", "kill=1", "appends 6: accepted 5, stale 1", "owned again after 4.2s", "Ok 2, Illegal 0"} {
		if !strings.Contains(text, want) {
			t.Errorf("WriteText lacks %q:\n%s", want, text)
		}
	}
}

// TestVisualization checks that an illegal partition's history is drawn
// into OutDir and named in the evidence.
func TestVisualization(t *testing.T) {
	b := baseline(hooks{end: func(b *builder) { b.consumerOp("c1", 1, KindFetch, 7, OffsetOK) }})
	dir := t.TempDir()
	r := mustCheck(t, b.build(40*time.Second), Options{OutDir: filepath.Join(dir, "viz")})
	if len(r.Violations) != 1 || r.Violations[0].Kind != NotLinearizable {
		t.Fatalf("violations %v", r.Violations)
	}
	path := filepath.Join(dir, "viz", "linearizability-g-p1.html")
	if !strings.Contains(r.Violations[0].Evidence, path) || !strings.Contains(r.Violations[0].Evidence, "fetch -> 7") {
		t.Errorf("evidence %q", r.Violations[0].Evidence)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Errorf("visualisation: %v", err)
	}
}

// TestLoadWrite writes the baseline as a run folder and loads it back.
func TestLoadWrite(t *testing.T) {
	in := baseline(hooks{}).build(40 * time.Second)
	dir := t.TempDir()
	if err := Write(dir, in); err != nil {
		t.Fatal(err)
	}
	// A worker killed mid-line.
	f, err := os.OpenFile(filepath.Join(dir, AttemptsDir, "wa.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"t0":"2026-12-01T14:00:41Z","op":"app`); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Notes) != 1 || !strings.Contains(got.Notes[0], "torn last line") {
		t.Errorf("notes %q", got.Notes)
	}
	if got.Run.SessionTimeout != in.Run.SessionTimeout || got.Run.Partitions != 2 || len(got.Run.Faults) != 1 ||
		!got.Run.Faults[0].End.Equal(in.Run.Faults[0].End) {
		t.Errorf("run %+v, want %+v", got.Run, in.Run)
	}
	if len(got.Attempts) != len(in.Attempts) || len(got.Rows) != len(in.Rows) || len(got.History) != len(in.History) ||
		len(got.RevTimes) != len(in.RevTimes) || len(got.Offsets) != len(in.Offsets) {
		t.Fatalf("loaded %d/%d/%d/%d/%d, want %d/%d/%d/%d/%d", len(got.Attempts), len(got.Rows), len(got.History), len(got.RevTimes), len(got.Offsets),
			len(in.Attempts), len(in.Rows), len(in.History), len(in.RevTimes), len(in.Offsets))
	}
	for i := range in.History {
		if !bytes.Equal(got.History[i].Key, in.History[i].Key) || !bytes.Equal(got.History[i].Value, in.History[i].Value) {
			t.Fatalf("history %d: %+v, want %+v", i, got.History[i], in.History[i])
		}
	}
	r := mustCheck(t, got, Options{})
	if !r.OK() || len(r.Notes) != 1 {
		t.Errorf("loaded baseline: %s", describe(r))
	}

	// A torn line anywhere else is an error.
	if err := os.WriteFile(filepath.Join(dir, RowsFile), []byte("{\"resource\":\n{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "rows.jsonl:1") {
		t.Errorf("Load with a bad row: %v", err)
	}
}

// TestBadInput checks that Check refuses what it cannot read.
func TestBadInput(t *testing.T) {
	for name, edit := range map[string]func(in *Input){
		"no group":        func(in *Input) { in.Run.Group = "" },
		"no partitions":   func(in *Input) { in.Run.Partitions = 0 },
		"no timeouts":     func(in *Input) { in.Run.SessionTimeout = 0 },
		"no revtimes":     func(in *Input) { in.RevTimes = nil },
		"undecodable key": func(in *Input) { in.History[0].Key = []byte(testPrefix + "groups/g/what/x") },
		"bad value":       func(in *Input) { in.History[0].Value = []byte(`{"zz":1}`) },
		"fault ends before it starts": func(in *Input) {
			in.Run.Faults[0].End = in.Run.Faults[0].Start.Add(-time.Second)
		},
	} {
		t.Run(name, func(t *testing.T) {
			in := baseline(hooks{}).build(40 * time.Second)
			edit(in)
			if _, err := Check(in, Options{}); err == nil {
				t.Error("no error")
			}
		})
	}
}

// TestForgeries: check 9 finds a forgery a resource accepted (by its
// attempt line, or by its row alone), and an honest write refused as
// unverified; refused forgeries and honest writes are fine.
func TestForgeries(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	attempts := []Attempt{
		{Op: OpForge, Cause: "invented", Worker: "w1", Partition: 3, Token: 1005, Seq: -1, Resource: ResourcePostgres, Outcome: OutcomeUnverified, T1: at},
		{Op: OpForge, Cause: "tampered", Worker: "w1", Partition: 4, Token: 5, Seq: -2, Resource: ResourcePostgres, Outcome: OutcomeOK, T1: at},
		{Op: OpAppend, Worker: "w2", Partition: 5, Token: 5, Seq: 1, Resource: ResourceEtcd, Outcome: OutcomeOK, T1: at},
		{Op: OpAppend, Worker: "w2", Partition: 5, Token: 5, Seq: 2, Resource: ResourceEtcd, Outcome: OutcomeUnverified, Err: "unknown key", T1: at},
	}
	rows := []Row{
		{Resource: ResourceEtcd, Partition: 5, Seq: 1, Token: 5, Worker: "w2"},
		{Resource: ResourceEtcd, Partition: 6, Seq: -7, Token: 99, Worker: "w1"},
	}
	vs := checkForgeries(rows, attempts)
	var kinds []string
	for _, v := range vs {
		kinds = append(kinds, fmt.Sprintf("%s p%d", v.Kind, v.Partition))
	}
	want := []string{"forged-accepted p4", "honest-refused p5", "forged-accepted p6"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("violations %q, want %q", kinds, want)
	}
	var st Stats
	countForgeries(attempts, &st)
	if len(st.Forgeries) != 2 || st.Forgeries[0] != (ForgeryStats{Kind: "invented", Tried: 1, Unverified: 1}) ||
		st.Forgeries[1] != (ForgeryStats{Kind: "tampered", Tried: 1, Accepted: 1}) {
		t.Fatalf("forgery stats %+v", st.Forgeries)
	}
}
