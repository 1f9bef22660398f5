package sim_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tenure-dev/tenure/sim"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func mustBuiltin(t testing.TB, name string, set ...string) *sim.Scenario {
	t.Helper()
	sc, err := sim.Builtin(name)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range set {
		k, v, _ := strings.Cut(kv, "=")
		if err := sc.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	return sc
}

func run(t testing.TB, sc *sim.Scenario, opts sim.Options) *sim.Report {
	t.Helper()
	rep, err := sim.Run(sc, opts)
	if err != nil {
		t.Fatalf("scenario %s seed %d: %v", sc.Name, opts.Seed, err)
	}
	return rep
}

// TestDeterminism: the same scenario and seed give the same trace, byte for
// byte; another seed gives another trace; tracing changes nothing.
func TestDeterminism(t *testing.T) {
	for _, name := range []string{"gc-pauses", "flaky-network", "rolling-restart"} {
		t.Run(name, func(t *testing.T) {
			sc := mustBuiltin(t, name, "run.for=3m")
			var a, b bytes.Buffer
			ra := run(t, sc, sim.Options{Seed: 42, Trace: &a})
			rb := run(t, sc, sim.Options{Seed: 42, Trace: &b})
			if ra.Engine.TraceHash != rb.Engine.TraceHash {
				t.Fatalf("seed 42 twice: trace hashes %s and %s", ra.Engine.TraceHash, rb.Engine.TraceHash)
			}
			if !bytes.Equal(a.Bytes(), b.Bytes()) {
				t.Fatal("seed 42 twice: the text traces differ")
			}
			if a.Len() == 0 {
				t.Fatal("empty trace")
			}
			quiet := run(t, sc, sim.Options{Seed: 42})
			if quiet.Engine.TraceHash != ra.Engine.TraceHash || quiet.Engine.Events != ra.Engine.Events {
				t.Fatal("writing the trace changed the run")
			}
			other := run(t, sc, sim.Options{Seed: 43})
			if other.Engine.TraceHash == ra.Engine.TraceHash {
				t.Fatal("seeds 42 and 43 gave the same trace")
			}
		})
	}
}

// TestSafetyOverSeeds is the simulator's main safety check, VOPR style:
// many short runs of the harsh scenarios, each seed printed when it fails.
//
//   - With fencing, no stale write is ever accepted.
//   - Without pauses (flaky-network), no member even attempts a stale
//     write: members stop at their safe-ownership deadline before the
//     coordinator can expire them, whatever the network does.
//   - The check can fail: in gc-pauses the unfenced resource does accept
//     stale writes for some seeds (members paused past their session
//     wake up and write).
func TestSafetyOverSeeds(t *testing.T) {
	seeds := 50
	if testing.Short() {
		seeds = 10
	}
	var unfencedDamage, rejected int64
	for _, name := range []string{"gc-pauses", "flaky-network"} {
		sc := mustBuiltin(t, name, "run.for=2m")
		for seed := 1; seed <= seeds; seed++ {
			rep := run(t, sc, sim.Options{Seed: uint64(seed), TimelinePartition: -1})
			s := rep.Safety
			if s.FencedAcceptedStale != 0 {
				t.Errorf("%s seed %d: the fence accepted %d stale writes", name, seed, s.FencedAcceptedStale)
			}
			if s.Writes == 0 {
				t.Errorf("%s seed %d: no writes at all", name, seed)
			}
			switch name {
			case "flaky-network":
				if s.StaleAttempted != 0 {
					t.Errorf("%s seed %d: %d stale writes attempted without any pause", name, seed, s.StaleAttempted)
				}
			case "gc-pauses":
				unfencedDamage += s.UnfencedAcceptedStale
				rejected += s.FencedRejected
			}
		}
	}
	if unfencedDamage == 0 || rejected == 0 {
		t.Errorf("gc-pauses over %d seeds: unfenced accepted %d stale writes, the fence rejected %d; want some of both",
			seeds, unfencedDamage, rejected)
	}
}

// TestPauseDefersEverything checks the process model of a stop-the-world
// pause: while m1 is paused past its session, nothing of it runs; when it
// resumes, the writes it had in flight land first, while it still believes
// it owns its partitions, and only then do its timers run and make it
// notice the lost session.
func TestPauseDefersEverything(t *testing.T) {
	sc, err := sim.ParseScenario("pause", `
members n=2
topic name=t partitions=4
timing heartbeat=1s session=10s rebalance=30s margin=200ms
network delay=1ms
pause member=m1 at=30s for=15s
work every=100ms
run for=60s
`)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	rep := run(t, sc, sim.Options{Seed: 1, Trace: &buf})
	var m1 []string
	paused, resumed := false, false
	for _, line := range strings.Split(buf.String(), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[1] != "m1" {
			continue
		}
		what := strings.Join(f[2:], " ")
		switch {
		case strings.HasPrefix(what, "pause"):
			paused = true
		case strings.HasPrefix(what, "resume"):
			paused, resumed = false, true
		case paused:
			t.Fatalf("m1 acted while paused: %s", line)
		}
		if resumed && len(m1) < 6 {
			m1 = append(m1, what)
		}
	}
	want := []string{
		"resume: 2 writes in flight, 2 events waiting",
		"stale write t/0 token 1 (coordinator: m2#1 token 3)",
		"stale write t/1 token 1 (coordinator: m2#1 token 3)",
		"claim t/0 Owned -> Suspect token 1 (deadline)",
		"claim t/1 Owned -> Suspect token 1 (deadline)",
		"claim t/0 Suspect -> Lost token 1 (session-expired)",
	}
	if strings.Join(m1, "\n") != strings.Join(want, "\n") {
		t.Fatalf("after the pause, m1 did:\n%s\nwant:\n%s", strings.Join(m1, "\n"), strings.Join(want, "\n"))
	}
	if rep.Safety.FencedRejected != 2 || rep.Safety.UnfencedSuperseded != 2 {
		t.Fatalf("the fence rejected %d in-flight writes and the unfenced copy took %d superseded ones; want 2 and 2",
			rep.Safety.FencedRejected, rep.Safety.UnfencedSuperseded)
	}
	if rep.Churn.FalseExpulsions != 1 {
		t.Fatalf("false expulsions %d, want 1 (m1, paused past its session)", rep.Churn.FalseExpulsions)
	}
}

// TestFailover runs the failover scenario, whose coordinator loses its
// leader three times: each successor is restored from the persisted
// records, so members keep their epochs and tokens, nobody is expelled
// (the takeover is shorter than the session), no epoch or token goes
// backwards (the successor checks the epoch it restores; the fenced
// resource, the tokens), and no stale write gets through.
func TestFailover(t *testing.T) {
	sc := mustBuiltin(t, "failover")
	for seed := uint64(1); seed <= 5; seed++ {
		rep := run(t, sc, sim.Options{Seed: seed})
		if rep.Churn.FalseExpulsions != 0 {
			t.Errorf("seed %d: fail-overs expelled %d live members", seed, rep.Churn.FalseExpulsions)
		}
		if rep.Safety.FencedAcceptedStale != 0 || rep.Safety.TokenMismatches != 0 {
			t.Errorf("seed %d: safety after fail-overs: %+v", seed, rep.Safety)
		}
		if rep.Availability.NotReassigned != 0 {
			t.Errorf("seed %d: %d partitions never reassigned", seed, rep.Availability.NotReassigned)
		}
	}
}

// TestFailoverTakeoverGrace: a member whose process dies with the
// coordinator's leader is not heard by the successor, which never had its
// connection, so the successor's restored session decides: the member's
// own session without a takeover grace, the grace (plus up to an eighth,
// by member) with one. Either way the partitions move only after the
// takeover.
func TestFailoverTakeoverGrace(t *testing.T) {
	const src = `
members n=4 start=uniform(min=0s,max=300ms)
topic name=work partitions=16
timing heartbeat=300ms session=3s rebalance=2s margin=100ms request-timeout=500ms conn-grace=1s %s
failover at=10s %s
crash member=m1 at=10s
work every=100ms
run for=30s
`
	for _, c := range []struct {
		grace, takeover string
		lo, hi          time.Duration // from the crash to the partitions re-owned
	}{
		{"", "takeover=1s", time.Second + 3*time.Second, time.Second + 3*time.Second + time.Second},
		{"takeover-grace=8s", "takeover=1s", time.Second + 8*time.Second, time.Second + 9*time.Second + time.Second},
		// An election TTL of 1 s: the takeover takes 5/6 s to 1.5 s.
		{"takeover-grace=8s", "ttl=1s", 5*time.Second/6 + 8*time.Second, 1500*time.Millisecond + 9*time.Second + time.Second},
	} {
		sc, err := sim.ParseScenario("takeover-grace", fmt.Sprintf(src, c.grace, c.takeover))
		if err != nil {
			t.Fatal(err)
		}
		seen := map[time.Duration]bool{}
		for seed := uint64(1); seed <= 5; seed++ {
			a := run(t, sc, sim.Options{Seed: seed}).Availability
			got := time.Duration(a.ReassignMax * float64(time.Second))
			seen[got.Round(10*time.Millisecond)] = true
			if a.Crashes != 1 || a.NotReassigned != 0 || got < c.lo || got > c.hi {
				t.Errorf("%q, seed %d: %d crashes, %d not reassigned, re-owned after %v; want %v to %v",
					c.grace, seed, a.Crashes, a.NotReassigned, got, c.lo, c.hi)
			}
		}
		if c.grace != "" && len(seen) < 3 {
			t.Errorf("%q %q: re-owned after %v over 5 seeds: the spread by member (and the election) should vary with the seed", c.grace, c.takeover, seen)
		}
	}
}

func TestReportRenders(t *testing.T) {
	rep := run(t, mustBuiltin(t, "host-crash", "run.for=3m"), sim.Options{Seed: 3, TimelinePartition: 0})
	var text, js, csv, tl bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"AVAILABILITY", "unowned partition-seconds", "fenced: accepted stale", "TIMELINE OF work/0", "trace hash"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
	if err := rep.WriteJSON(&js); err != nil || !strings.Contains(js.String(), `"unowned_partition_s"`) {
		t.Errorf("JSON report: %v\n%s", err, js.String())
	}
	if err := rep.WriteCSV(&csv); err != nil || !strings.Contains(csv.String(), "safety.fenced_accepted_stale,0") {
		t.Errorf("CSV report: %v\n%s", err, csv.String())
	}
	if err := rep.WriteTimelineCSV(&tl); err != nil || strings.Count(tl.String(), "\n") < 3 {
		t.Errorf("timeline CSV: %v\n%s", err, tl.String())
	}
	if rep.Availability.Crashes != 1 || rep.Availability.ReassignMax < 9 || rep.Availability.ReassignMax > 12 {
		t.Errorf("host crash of m2 with a 10 s session: %d crashes, reassigned in %.1fs; want 1 in about 10 s",
			rep.Availability.Crashes, rep.Availability.ReassignMax)
	}
}
