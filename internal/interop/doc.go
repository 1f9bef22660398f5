// Package interop is the fail-over matrix: stock Kafka clients of several
// languages (franz-go kgo KIP-848 and classic, librdkafka, kafka-python,
// kafkajs, @platformatic/kafka) consume one topic in a group of a tenure
// HA set while its coordinating node is lost for good (SIGKILL, SIGSTOP,
// network isolation, SIGTERM; never restarted). Each run checks that no
// member is expelled, no partition is lost or revoked, every partition
// stays owned exactly once in the clients' callbacks and in the
// coordinator's view, a survivor serves the group within the election TTL
// plus 2 s, and committed offsets are kept.
//
// The matrix is a test that plain `go test ./...` skips: `make interop`
// runs it (see docs/FAILOVER.md). Each client is a small driver program
// under drivers/ that prints its callbacks as JSON lines ([Event]); this
// package's non-test code reads them ([Analyze]).
package interop
