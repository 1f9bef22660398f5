package sim_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/sim"
)

func TestParseScenario(t *testing.T) {
	sc, err := sim.ParseScenario("mine", `
# a comment
members n=4 static=true start=uniform(min=1s,max=3s)
topic name=work partitions=8   # trailing comment
topic name=other partitions=2
timing heartbeat=500ms session=5s rebalance=20s initial-delay=1s margin=100ms drift=0.02
network delay=lognormal(median=2ms,p99=20ms) loss=0.001 dup=0.0001
link nodes=(m1,2) delay=50ms
pauses every=exp(mean=10m) length=pareto(p99=2s,max=20s) members=(m1)
crash member=3 at=60s restart=5s
cut at=3m nodes=(m1,coord) heal=20s
rolling-restart at=2m surge=2 every=10s
scale-out at=5m n=4
work every=100ms inflight=0.5
run for=10m
`)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Members != 4 || !sc.Static || sc.StartDelay == nil {
		t.Errorf("members: %d static %v start %v", sc.Members, sc.Static, sc.StartDelay)
	}
	if len(sc.Topics) != 2 || sc.Topics[1] != (sim.Topic{Name: "other", Partitions: 2}) {
		t.Errorf("topics: %v", sc.Topics)
	}
	want := sim.Timing{HeartbeatInterval: 500 * time.Millisecond, SessionTimeout: 5 * time.Second,
		RebalanceTimeout: 20 * time.Second, InitialRebalanceDelay: time.Second, Margin: 100 * time.Millisecond, MaxDrift: 0.02,
		ConnLossGrace: sim.DefaultTiming().ConnLossGrace, ViewSettle: sim.DefaultTiming().ViewSettle}
	if sc.Timing != want {
		t.Errorf("timing %+v, want %+v", sc.Timing, want)
	}
	if sc.Network.Loss != 0.001 || sc.Network.Dup != 0.0001 {
		t.Errorf("network %v", sc.Network)
	}
	if l, ok := sc.Links["m2"]; !ok || l.Delay.String() != "50ms" || l.Loss != 0.001 {
		t.Errorf("link of m2: %v (links %v)", l, sc.Links)
	}
	if len(sc.Pauses) != 1 || sc.Pauses[0].Members[0] != "m1" {
		t.Errorf("pauses %v", sc.Pauses)
	}
	var kinds []string
	for _, a := range sc.Actions {
		kinds = append(kinds, a.Kind.String()+"@"+a.At.String())
	}
	if got := strings.Join(kinds, " "); got != "crash@1m0s rolling-restart@2m0s cut@3m0s scale-out@5m0s" {
		t.Errorf("actions in time order: %s", got)
	}
	if sc.Actions[0].Member != "m3" || sc.Actions[2].Nodes[1] != "coord" || sc.Actions[1].Surge != 2 {
		t.Errorf("action arguments: %+v", sc.Actions)
	}
	if sc.Work.Every != 100*time.Millisecond || sc.Work.InFlight != 0.5 || sc.Duration != 10*time.Minute {
		t.Errorf("work %+v duration %v", sc.Work, sc.Duration)
	}
}

func TestParseScenarioErrorsNameLineAndArgument(t *testing.T) {
	const base = "members n=2\ntopic name=t partitions=4\nrun for=1m\n"
	for _, tt := range []struct{ src, want string }{
		{base + "timing session=10x", `line 4: timing: argument session: "10x" is not a duration`},
		{base + "network delay=lognormal(median=2ms)", "line 4: network: argument delay: lognormal needs p99 or sigma"},
		{base + "netwrok delay=1ms", `line 4: unknown command "netwrok"`},
		{base + "timing sesion=10s", `line 4: timing: unknown argument "sesion"`},
		{base + "crash at=1m", "line 4: crash: argument member is required"},
		{base + "crash member=x at=1m", `line 4: crash: argument member: "x" is not a node`},
		{base + "cut at=1m nodes=(m1,m2", "line 4: unbalanced '('"},
		{base + "pauses every=exp(mean=1m) length=1s extra", `line 4: pauses: argument "extra" is not key=value`},
		{base + "network loss=2", `line 4: network: argument loss: "2" is not a probability`},
		{base + "timing heartbeat=5s session=10s", "heartbeat interval 5s × 3 exceeds session timeout 10s"},
		{base + "timing request-timeout=20s", "request timeout 20s must be shorter than the suspect deadline"},
		{base + "failover at=1m takeover=2s ttl=1s", "line 4: failover: argument ttl: give takeover or ttl, not both"},
		{base + "timing takeover-grace=-1s", "argument takeover-grace: duration -1s is negative"},
		{"members n=2\nrun for=1m\n", "no topic"},
	} {
		_, err := sim.ParseScenario("s", tt.src)
		if err == nil {
			t.Errorf("%q parsed", tt.src)
			continue
		}
		if !errors.Is(err, sim.ErrScenario) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("error %q, want an ErrScenario containing %q", err, tt.want)
		}
	}
}

func TestScenarioSet(t *testing.T) {
	sc, err := sim.Builtin("crash")
	if err != nil {
		t.Fatal(err)
	}
	orig := sc.Clone()
	if err := sc.Set("timing.session", "20s"); err != nil {
		t.Fatal(err)
	}
	if err := sc.Set("run.for", "1h"); err != nil {
		t.Fatal(err)
	}
	if err := sc.Set("clocks.skew", "0.001"); err != nil { // a command the scenario lacks
		t.Fatal(err)
	}
	if sc.Timing.SessionTimeout != 20*time.Second || sc.Duration != time.Hour || sc.ClockSkew != 0.001 {
		t.Fatalf("after Set: session %v duration %v skew %v", sc.Timing.SessionTimeout, sc.Duration, sc.ClockSkew)
	}
	if orig.Timing.SessionTimeout != 10*time.Second || orig.Duration != 10*time.Minute {
		t.Fatal("Set changed a clone made before it")
	}
	if !strings.Contains(sc.Source(), "session=20s") || !strings.Contains(sc.Source(), "clocks skew=0.001") {
		t.Fatalf("Source does not show the changes:\n%s", sc.Source())
	}
	before := sc.Source()
	for _, bad := range [][2]string{{"timing.session", "1s"}, {"timing", "1s"}, {"nosuch.x", "1"}, {"timing.nosuch", "1s"}} {
		if err := sc.Set(bad[0], bad[1]); err == nil {
			t.Errorf("Set(%q, %q) succeeded", bad[0], bad[1])
		}
	}
	if sc.Source() != before {
		t.Fatal("a failed Set changed the scenario")
	}
}

func TestBuiltinsParse(t *testing.T) {
	names := sim.Builtins()
	want := []string{"crash", "failover", "flaky-network", "gc-pauses", "host-crash", "rolling-restart", "scale-out", "steady"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("built-ins %v, want %v", names, want)
	}
	for _, name := range names {
		sc, err := sim.LoadScenario(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// The source renders back to an equivalent scenario.
		again, err := sim.ParseScenario(name, sc.Source())
		if err != nil || again.Source() != sc.Source() {
			t.Fatalf("%s does not round-trip through Source: %v", name, err)
		}
	}
	if _, err := sim.LoadScenario("nosuch"); err == nil || !strings.Contains(err.Error(), "neither a built-in") {
		t.Fatalf("LoadScenario(nosuch) = %v", err)
	}
}

// The commands as the issue that asked for the simulator wrote them.
func TestParseScenarioIssueExamples(t *testing.T) {
	sc, err := sim.ParseScenario("issue", `
members n=16 static=false
topic name=work partitions=64
timing heartbeat=1s session=10s rebalance=30s initial-delay=3s margin=200ms drift=0.01
network delay=lognormal(median=2ms,p99=20ms) loss=0.001 dup=0.0001
pauses every=exp(mean=10m) length=pareto(p99=2s,max=20s)
crash member=3 at=60s restart=5s
rolling-restart at=2m surge=1 every=10s
scale-out at=5m n=4
cut at=3m nodes=(m1,m2) heal=20s
work every=100ms
run for=10m
`)
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Actions) != 4 || sc.Members != 16 || sc.Network.Delay.Quantile(0.99).Round(time.Millisecond) != 20*time.Millisecond {
		t.Fatalf("parsed %+v", sc)
	}
	rep, err := sim.Run(sc, sim.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Safety.FencedAcceptedStale != 0 || rep.Availability.Crashes != 1 || rep.Churn.Joins < 16+4+16 {
		t.Fatalf("safety %+v crashes %d joins %d", rep.Safety, rep.Availability.Crashes, rep.Churn.Joins)
	}
}
