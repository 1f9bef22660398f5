//go:build unix

package interop

import "fmt"

// judge holds a run to what is expected of it: every check passes, unless
// the run is listed in expectedFailures, when it must fail some of the
// checks listed and no other, and must fail at all unless it may pass.
func judge(name string, r row) error {
	return judgeBy(expectedFailures, name, r)
}

// judgeBy is judge against the list given.
func judgeBy(expected map[string]expectation, name string, r row) error {
	failed := r.failed()
	exp, listed := expected[name]
	switch {
	case !listed && len(failed) == 0:
		return nil
	case !listed:
		return fmt.Errorf("%s failed %v: %+v", name, failed, r)
	case len(failed) == 0 && exp.mayPass:
		return nil
	case len(failed) == 0:
		return fmt.Errorf("%s passed, but is listed as failing %v (%s): take it off the list", name, exp.checks, exp.why)
	}
	for _, f := range failed {
		if !contains(exp.checks, f) {
			return fmt.Errorf("%s failed %v, but is listed as failing only %v (%s): %+v", name, failed, exp.checks, exp.why, r)
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// expectation is a run known to fail, and why.
type expectation struct {
	checks []string
	why    string
	// mayPass marks a failure that depends on timing (when the fault
	// lands in the client's heartbeat cycle): such a run may pass, but
	// may fail no other check.
	mayPass bool
}

// expectedFailures lists the runs that fail for a reason in the client
// that nothing a server answers can change (docs/FAILOVER.md shows each
// from the client's source), by client/topology/fault.
var expectedFailures = func() map[string]expectation {
	m := map[string]expectation{}
	add := func(client string, faults []fault, e expectation) {
		for _, topo := range topologies {
			for _, f := range faults {
				m[client+"/"+topo.name+"/"+string(f)] = e
			}
		}
	}
	add("kafkajs", []fault{faultKill, faultTerm}, expectation{
		checks: []string{"revoked", "unowned", "served"},
		why: "kafkajs looks its coordinator up only when it joins (consumerGroup.js [PRIVATE.JOIN]), and a join is an " +
			"eager rebalance: it gives up everything it owns for a JoinGroup/SyncGroup round trip, though it keeps its member " +
			"ID and its partitions; while the members rejoin the group is not Stable, which may take past TTL + 2 s to serve",
	})
	add("kafkajs", []fault{faultStop, faultIsolate}, expectation{
		checks: []string{"expelled", "lost", "unowned"},
		why: "kafkajs keeps the coordinator it found when it joined (consumerGroup.js, this.coordinator, set in " +
			"[PRIVATE.JOIN] only) and heartbeats to it; against a node that accepts and never answers each attempt waits " +
			"requestTimeout (30 s) before its retries, so no member reaches the survivors before the takeover grace (30 s) " +
			"ends: all are expelled while they still consume, and a crash and restart as a new member may follow",
	})
	add("platformatic", []fault{faultStop, faultIsolate}, expectation{
		checks: []string{"revoked", "unowned", "expelled"},
		why: "@platformatic/kafka 1.35 has a Fetch in flight to each partition leader; the one to the frozen node ends after " +
			"the connection's requestTimeout (30 s, network/connection.js) with a TimeoutError marked canRetry: false " +
			"(errors.js), so kPerformWithRetry does not retry it, the MessagesStream destroys itself, and its close untracks " +
			"the consumer's topics (consumer.js, topics.untrackAll): the next heartbeat subscribes to nothing and the " +
			"coordinator takes every partition away. When the frozen node is the first seed, the client's Metadata goes to " +
			"it too (base.js, kGetBootstrapConnection: the first seed with an open connection) and waits the same 30 s, so " +
			"no heartbeat reaches the new coordinator before its takeover grace ends: the members are expelled. No server " +
			"answer reaches a request waiting on a frozen socket",
	})
	return m
}()
