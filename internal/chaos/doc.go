// Package chaos is tenure's chaos suite (`tenure chaos`): seeded runs of the
// real binaries on loopback under crashes, pauses, network faults and
// coordinator fail-over, each checked afterwards by package check, which
// trusts only what the resources hold, what the clients logged and the
// coordinator's history as etcd kept it.
//
// A run is three etcd members, three `tenure serve` nodes forming an HA set
// on them, Config.Workers `tenure worker` processes writing every record to
// PostgreSQL and to etcd under the claim's token, and Config.Committers
// stock kgo KIP-848 consumers (`tenure chaos-committer`) committing offsets.
// Every client reaches every server through a toxiproxy proxy of its own,
// and the etcd members reach each other through one proxy per member, so
// that a fault can cut one process off while the rest of the network stays
// whole. [Schedule] draws the faults from the seed; [Run] carries them out,
// collects the run folder the checker reads and checks it.
//
// A run replays its fault schedule exactly from its seed; the timing
// inside the processes (who wins a race, when a heartbeat lands) differs
// from one replay to the next.
package chaos
