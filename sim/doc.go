// Package sim is tenure's deterministic simulator: it runs the real
// coordinator core (package coordinator) and the real member core (package
// member) against a simulated network, simulated processes and a simulated
// resource, in virtual time, to show what a workload's pauses, crashes,
// deploys and network trouble do to a group with given timing settings,
// before it meets them in production.
//
//	sc, _ := sim.Builtin("gc-pauses")
//	_ = sc.Set("timing.session", "20s")
//	rep, _ := sim.Run(sc, sim.Options{Seed: 1})
//	rep.WriteText(os.Stdout)
//
// # Determinism
//
// A run is a discrete-event simulation: a virtual clock, and a heap of
// events ordered by (time, sequence number), so that simultaneous events
// fire in the order they were scheduled. Every random draw comes from PCG
// sources seeded from Options.Seed (one stream per concern: network,
// crashes, work, each member). Nothing in the simulated world starts a
// goroutine or reads a clock, and the times handed to the cores are
// Origin() plus the elapsed virtual time, without a monotonic reading. The
// same scenario and seed therefore give the same run, event for event: the
// report's trace hash (xxhash over every event and note) identifies it, and
// Options.Trace writes it out line by line, byte-identical between runs.
// TestGolden pins each built-in scenario's report, trace hash included,
// to testdata/golden: a change meant only to make the engine faster must
// leave those files alone.
//
// # Speed
//
// Most events are the members' periodic writes (16 members writing every
// 100 ms against one heartbeat a second each). They are scheduled in time
// order, so they wait in a FIFO beside the heap and the engine fires them
// without building an event; a write by the owner of record under its own
// token, which the resource already holds as its highest (nearly all of
// them), is only counted. A heartbeat's two network messages are reused
// once delivered. `tenure sim` and `tenure tune` run the collector at
// GOGC=400 (unless GOGC is set): a run's live heap is a few megabytes and
// the cores allocate a request and a response per heartbeat. BenchmarkDay
// measures a simulated day.
//
// # What is simulated
//
// The coordinator node drives a coordinator.Group exactly as the TCP
// server does: requests in, Ready out, records persisted (to a
// store.Memory) before replies are sent, Tick at NextTick. The coordinator's
// view of who owns what comes from those persisted records. A coordinator
// fail-over drops the group and, after the takeover delay (given, or
// drawn from the election TTL as etcd's lease expiry makes it), rebuilds
// it from the store's records with coordinator.Restore, as a tenure node
// that wins the election does, under the takeover grace if one is set;
// requests sent in between are lost.
//
// Each member slot runs a sequence of processes, each driving a
// member.Machine as the member.Join shell does: it sends the machine's
// ConsumerGroupHeartbeats, reports responses (or a failure when the
// request timeout passes), starts and stops work on claims and reports
// Started and Released, and fires the machine's timers. Members' clocks
// may run fast or slow (clocks skew=).
//
// The network carries each request and response as a kmsg value: per-link
// delay distributions, loss, duplication (a duplicate is a deep copy made by
// encoding and decoding), reordering (links are otherwise FIFO, like TCP),
// and cuts that separate named sets of nodes until they heal. A message
// crossing a cut when it is sent or when it arrives is lost.
//
// Each member process has a connection to the coordinator, as the real
// shells do. A process that exits or crashes has its connection closed by
// its kernel: the FIN reaches the coordinator a link delay later (after
// what the process sent before it; a cut drops it), and the coordinator
// node, like the TCP server, tells the group through
// coordinator.ConnectionClosed for the member whose latest request
// came on that connection, so that the connection-loss grace
// (timing conn-grace=) expels it long before its session would expire. A
// host crash (crash host=true) closes nothing, nor does a cut or a pause:
// those wait for the session timeout. conn-drops closes a random live
// member's connection under it (a proxy's idle timeout); the member opens
// a new one with its next request, and keeps its place if that comes
// within the grace. A fail-over forgets every connection, and changes the
// HA set's view: a close within timing view-settle= of it starts no grace
// (coordinator.ViewSettling, as in the server). With the
// coordinator's TCP keepalive (timing keepalive=), a host crash or a cut
// starts a clock instead: once the member's host has answered nothing for
// that long, its connection is aborted and counts as closed; a paused
// process's kernel keeps answering, so pauses never start it.
//
// Processes pause (stop-the-world pauses drawn from any [Dist]), crash and
// restart (with static membership a restarted member rejoins as the same
// instance), start slowly, restart in rolling deploys, scale out and in.
// During a pause nothing of the process runs: its timers, messages and
// work wait and run, in order, when it resumes, after the writes that were
// in flight when it paused, which land first, before the process can
// notice it lost its session. That is how zombie writes happen.
//
// # The resource and what the report measures
//
// Every owner writes each of its partitions every Work.Every, carrying the
// partition's token, to two copies of a resource: one checks tokens with
// epoch.MemFence, the other accepts everything. A write is stale if its
// writer is not the partition's owner in the coordinator's view at that
// instant, or if a higher token was already written. The report counts
// stale writes attempted, rejected by the fence, and accepted by the
// unfenced copy: the damage fencing prevents. A fenced write that is
// accepted although a higher token was admitted before, or under a token
// the coordinator never let its writer hold, is a safety violation; the
// tests assert that it never happens.
//
// The [Report] also measures availability (partition-seconds without a
// working owner, by incident; partition-seconds whose owners were all
// paused; time from a crash to full reassignment),
// double ownership, churn (rebalances, moves against the fewest possible,
// false expulsions: members expelled while alive) and cost (heartbeats and
// coordinator steps per second). [Report.Metrics] lists every figure by
// name.
//
// # Scenarios
//
// Scenarios are plain text, one command per line (see [ParseScenario]);
// [Builtins] lists those shipped with tenure, and `tenure sim` runs them.
// Package tune searches timing settings over a mix of scenarios.
package sim
