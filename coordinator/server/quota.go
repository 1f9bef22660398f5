package server

import (
	"sync"
	"time"
)

// Request-rate quotas (Config.QuotaRequestRate per principal,
// QuotaConnectionRequestRate per connection) throttle a client the way
// Kafka throttles one over a quota (KIP-219): the request is served, its
// response goes out at once carrying throttle_time_ms, and the server
// reads nothing more from the connection until that time has passed (the
// broker mutes the channel). A client that honours the throttle time waits
// on its side too; one that does not gains nothing, since nothing it sends
// is read meanwhile.
//
// Each quota is a token bucket that may go into debt: it holds up to one
// second of requests, every request takes one token, and a request that
// leaves the bucket in debt is throttled for as long as the debt takes to
// repay at the quota's rate. So a client within its quota is never
// throttled, a burst of a second's worth passes at full speed, and a
// client over it is paced at exactly its quota. A principal's bucket is
// shared by all its connections: with many of them each is throttled for
// the debt of all, which holds their sum to the quota. Throttles are
// capped at maxThrottle (Kafka caps them at its quota window), and so is
// the debt a bucket may run up.

// maxThrottle is the longest throttle given.
const maxThrottle = 10 * time.Second

// bucket is one quota's token bucket.
type bucket struct {
	mu     sync.Mutex
	rate   float64 // tokens per second
	tokens float64
	last   time.Time
	refs   int // connections charging it (principal buckets; quotas.mu)
}

func newBucket(rate float64) *bucket {
	return &bucket{rate: rate, tokens: burst(rate)}
}

// burst is a bucket's capacity: one second of requests, at least one.
func burst(rate float64) float64 { return max(rate, 1) }

// take charges one request arriving at now and returns how long its
// client must wait: zero while the bucket is not in debt.
func (b *bucket) take(now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.last.IsZero() {
		b.tokens = min(burst(b.rate), b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	b.last = now
	b.tokens = max(b.tokens-1, -b.rate*maxThrottle.Seconds())
	if b.tokens >= 0 {
		return 0
	}
	return min(time.Duration(-b.tokens/b.rate*float64(time.Second)), maxThrottle)
}

// quotas holds the principals' buckets.
type quotas struct {
	principalRate, connRate float64

	mu          sync.Mutex
	byPrincipal map[string]*bucket
}

func newQuotas(principalRate, connRate float64) *quotas {
	return &quotas{principalRate: principalRate, connRate: connRate, byPrincipal: make(map[string]*bucket)}
}

func (q *quotas) on() bool { return q.principalRate > 0 || q.connRate > 0 }

// connQuota is a connection's quota state, owned by its reader.
type connQuota struct {
	principal string  // whose bucket pb is
	pb        *bucket // the principal's, shared; nil until the first request
	cb        *bucket // the connection's own
	until     time.Time
}

// charge charges one request of c read at now and returns its throttle
// time, which it also arms: the reader reads nothing more until it ends.
func (q *quotas) charge(c *conn, now time.Time) time.Duration {
	cq := &c.quota
	var d time.Duration
	quota := "connection"
	if q.connRate > 0 {
		if cq.cb == nil {
			cq.cb = newBucket(q.connRate)
		}
		d = cq.cb.take(now)
	}
	if q.principalRate > 0 {
		if cq.pb == nil || cq.principal != c.principal {
			q.release(cq)
			cq.principal, cq.pb = c.principal, q.acquire(c.principal)
		}
		if pd := cq.pb.take(now); pd > d {
			d, quota = pd, "principal"
		}
	}
	if d <= 0 {
		return 0
	}
	c.s.m.throttled.WithLabelValues(quota).Inc()
	c.s.m.throttleSeconds.Add(d.Seconds())
	cq.until = now.Add(d)
	return d
}

// acquire returns principal's bucket, creating it for its first
// connection.
func (q *quotas) acquire(principal string) *bucket {
	q.mu.Lock()
	defer q.mu.Unlock()
	b := q.byPrincipal[principal]
	if b == nil {
		b = newBucket(q.principalRate)
		q.byPrincipal[principal] = b
	}
	b.refs++
	return b
}

// release lets go of cq's principal bucket; the last connection of a
// principal drops it, so the map holds only connected principals.
func (q *quotas) release(cq *connQuota) {
	if cq.pb == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if cq.pb.refs--; cq.pb.refs == 0 && q.byPrincipal[cq.principal] == cq.pb {
		delete(q.byPrincipal, cq.principal)
	}
	cq.pb = nil
}

// throttleMillis is a throttle time as a response carries it, rounded up
// so that a client never comes back early.
func throttleMillis(d time.Duration) int32 {
	return int32((d + time.Millisecond - 1) / time.Millisecond)
}

// waitThrottle is the muting: once the responses so far are written, it
// keeps the reader from reading while c is throttled. It reports false if
// the connection closed or the server began stopping meanwhile.
func (c *conn) waitThrottle() bool {
	until := c.quota.until
	if until.IsZero() {
		return true
	}
	c.quota.until = time.Time{}
	d := time.Until(until)
	if d <= 0 {
		return true
	}
	c.flush()
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		c.mu.Lock()
		if c.stopping || c.closed {
			c.mu.Unlock()
			return false
		}
		// Whoever stops or closes the connection wakes the reader
		// through space; so may a writer, which is why this loops.
		c.waitSpace = true
		c.mu.Unlock()
		select {
		case <-t.C:
			c.mu.Lock()
			c.waitSpace = false
			c.mu.Unlock()
			return true
		case <-c.space:
		}
	}
}
