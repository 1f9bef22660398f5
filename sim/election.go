package sim

import (
	"math/rand/v2"
	"time"
)

// leaseRenewals is how many times per election TTL a tenure node renews
// its etcd lease (coordinator/ha: KeepAliveOnce every TTL/6).
const leaseRenewals = 6

// etcdExpirySweep is how often etcd's lessor looks for expired leases
// (its runLoop's ticker): a lease past its expiry is revoked at the next
// sweep.
const etcdExpirySweep = 500 * time.Millisecond

// takeover returns the delay from the loss of the coordinator's leader
// until its successor serves: Takeover as given, or, with an ElectionTTL,
// the delay etcd makes. The dead leader's lease expires a TTL after its
// last renewal, which came up to TTL/6 before the crash; etcd revokes it
// at its next expiry sweep, and the next candidate's key is then the
// oldest. The successor's own start (a watch event, a revision check and
// resuming its warm standby's groups) takes milliseconds and is left out.
func (a *Action) takeover(rng *rand.Rand) time.Duration {
	if a.ElectionTTL <= 0 {
		return a.Takeover
	}
	sinceRenewal := time.Duration(rng.Int64N(int64(a.ElectionTTL / leaseRenewals)))
	sweep := time.Duration(rng.Int64N(int64(etcdExpirySweep)))
	return a.ElectionTTL - sinceRenewal + sweep
}
