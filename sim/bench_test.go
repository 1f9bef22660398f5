package sim_test

import (
	"testing"
	"time"

	"github.com/tenure-dev/tenure/internal/benchcpu"
	"github.com/tenure-dev/tenure/sim"
)

// BenchmarkEvents measures the engine's speed in simulated events per
// second of wall time, on the steady scenario (16 members, 64 partitions,
// heartbeats every second, writes every 100 ms).
//
//	go test -run '^$' -bench Events -cpuprofile cpu.out ./sim/
func BenchmarkEvents(b *testing.B) {
	sc, err := sim.Builtin("steady")
	if err != nil {
		b.Fatal(err)
	}
	var events int64
	start, cpu0 := time.Now(), benchcpu.Process()
	for i := 0; b.Loop(); i++ {
		rep, err := sim.Run(sc, sim.Options{Seed: uint64(i), TimelinePartition: -1})
		if err != nil {
			b.Fatal(err)
		}
		events += rep.Engine.Events
	}
	b.ReportMetric(float64(events)/time.Since(start).Seconds(), "events/s")
	b.ReportMetric(float64(events)/(benchcpu.Process()-cpu0).Seconds(), "events/cpu-s")
	b.ReportMetric(float64(events)/float64(b.N), "events/run")
}

// BenchmarkDay simulates 24 hours of a 64-partition group of 16 members
// heartbeating every second, with GC pauses and writes every 100 ms. The
// target is under 5 s of wall time per run.
func BenchmarkDay(b *testing.B) {
	sc, err := sim.Builtin("gc-pauses")
	if err != nil {
		b.Fatal(err)
	}
	if err := sc.Set("run.for", "24h"); err != nil {
		b.Fatal(err)
	}
	var events int64
	cpu0 := benchcpu.Process()
	for i := 0; b.Loop(); i++ {
		rep, err := sim.Run(sc, sim.Options{Seed: uint64(i), TimelinePartition: -1})
		if err != nil {
			b.Fatal(err)
		}
		events += rep.Engine.Events
	}
	b.ReportMetric((benchcpu.Process()-cpu0).Seconds()/float64(b.N), "cpu-s/op")
	b.ReportMetric(float64(events)/float64(b.N), "events/run")
}
