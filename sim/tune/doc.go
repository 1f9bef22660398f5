// Package tune searches the timing settings of a tenure group for the ones
// that suit a workload best, by simulating them (package sim) over a mix of
// scenarios and many seeds.
//
// A search tries every point of a [Space] (heartbeat interval, session
// timeout, rebalance timeout, initial rebalance delay, suspect margin,
// static membership) that package epoch's rules accept, in two stages: all
// candidates on a few screening seeds, then the most promising ones (the
// best by the [Objective] and the Pareto front) on more seeds, for
// confidence intervals. Kafka's and tenure's defaults always run both
// stages, as baselines on the same scenarios and seeds.
//
// Each candidate is judged on three figures, all minimised: unowned
// partition-seconds per hour (availability), false expulsions per
// member-day (members expelled while alive, by a pause or a network cut),
// and heartbeats per second (the coordinator's load). The [Outcome] holds
// the Pareto front of those figures, the recommended candidate, and the
// comparison with the baselines; [Flags] and [MemberOptions] render a
// candidate as settings to paste.
//
// Runs go in parallel, each single-threaded and deterministic, and the
// outcome is aggregated in a fixed order: it does not depend on
// GOMAXPROCS or on which run finishes first.
package tune
