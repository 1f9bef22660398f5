package sim_test

import (
	"fmt"
	"time"

	"github.com/tenure-dev/tenure/sim"
)

// A member stops the world for 15 s, longer than its 10 s session: the
// coordinator expels it while it is alive and gives its partitions away,
// and the writes it had in flight land after the new owner's. The fence
// rejects them; an unfenced resource would have taken them.
func ExampleRun() {
	sc, err := sim.ParseScenario("long-pause", `
members n=2
topic name=work partitions=4
timing heartbeat=1s session=10s rebalance=30s margin=200ms
network delay=1ms
pause member=m1 at=30s for=15s
work every=100ms
run for=1m
`)
	if err != nil {
		panic(err)
	}
	rep, err := sim.Run(sc, sim.Options{Seed: 1})
	if err != nil {
		panic(err)
	}
	fmt.Println("false expulsions:", rep.Churn.FalseExpulsions)
	fmt.Println("stale writes rejected by the fence:", rep.Safety.FencedRejected)
	fmt.Println("stale writes accepted by the fence:", rep.Safety.FencedAcceptedStale)
	fmt.Println("stale writes an unfenced resource accepted:", rep.Safety.UnfencedAcceptedStale)
	// Output:
	// false expulsions: 1
	// stale writes rejected by the fence: 2
	// stale writes accepted by the fence: 0
	// stale writes an unfenced resource accepted: 2
}

// Scenario settings can be changed after parsing, as `tenure sim --set`
// does; a setting that breaks epoch's timing rules is refused.
func ExampleScenario_Set() {
	sc, err := sim.Builtin("crash")
	if err != nil {
		panic(err)
	}
	fmt.Println(sc.Set("timing.session", "20s"), sc.Timing.SessionTimeout)
	err = sc.Set("timing.session", "2s")
	fmt.Println(err != nil, sc.Timing.SessionTimeout)
	// Output:
	// <nil> 20s
	// true 20s
}

// Distributions are written as in scenario files.
func ExampleParseDist() {
	d, err := sim.ParseDist("pareto(p99=2s,max=20s)")
	if err != nil {
		panic(err)
	}
	fmt.Println(d)
	fmt.Println(d.Quantile(0.99).Round(time.Millisecond), d.Quantile(0.99999))
	// Output:
	// pareto(min=92.831776ms,alpha=1.5,max=20s)
	// 2s 20s
}
