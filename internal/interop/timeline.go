package interop

import (
	"bufio"
	"encoding/json"
	"io"
	"slices"
	"time"
)

// Event is one line a driver prints: a callback of its client, or the
// driver's own life.
type Event struct {
	// T is the wall-clock time in milliseconds since the Unix epoch
	// (fractional).
	T float64 `json:"t"`
	// Ev is started, assigned (partitions added), revoked (partitions
	// given back), lost (partitions taken away without a revoke: the
	// client's session ended), error (a client error, logged only),
	// stopping (the harness asked the driver to stop), or exited (the
	// harness saw the driver exit before it was asked to: everything it
	// owned is lost).
	Ev         string  `json:"ev"`
	Partitions []int32 `json:"partitions"`
	Msg        string  `json:"msg,omitempty"`
}

// Time returns T as a time.Time.
func (e Event) Time() time.Time { return time.UnixMicro(int64(e.T * 1e3)) }

// ReadEvents reads a driver's JSON lines, skipping lines that are not
// events (a client library's own output).
func ReadEvents(r io.Reader) ([]Event, error) {
	var out []Event
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<22)
	for sc.Scan() {
		var e Event
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Ev != "" && e.T > 0 {
			out = append(out, e)
		}
	}
	return out, sc.Err()
}

// Ownership is what the clients' callbacks say about a window of a run.
type Ownership struct {
	// Lost counts lost callbacks and driver exits, Revoked revoke
	// callbacks that named partitions.
	Lost, Revoked int
	// Unowned is the partition-time without an owner, Double the
	// partition-time with more than one.
	Unowned, Double time.Duration
}

// owners replays the callbacks of every client in time order.
type owners struct {
	by map[int32]map[string]bool
}

func (o *owners) apply(client string, e Event) {
	switch e.Ev {
	case "assigned":
		for _, p := range e.Partitions {
			if o.by[p] == nil {
				o.by[p] = map[string]bool{}
			}
			o.by[p][client] = true
		}
	case "revoked", "lost":
		for _, p := range e.Partitions {
			delete(o.by[p], client)
		}
	case "exited":
		for _, m := range o.by {
			delete(m, client)
		}
	}
}

type clientEvent struct {
	client string
	Event
}

func merge(events map[string][]Event) []clientEvent {
	var all []clientEvent
	for c, es := range events {
		for _, e := range es {
			all = append(all, clientEvent{c, e})
		}
	}
	slices.SortStableFunc(all, func(a, b clientEvent) int {
		switch {
		case a.T < b.T:
			return -1
		case a.T > b.T:
			return 1
		}
		return 0
	})
	return all
}

// Analyze replays the callbacks of every client (by client name) of a
// topic of partitions partitions and measures the window [from, to):
// callbacks before from only set who owns what; a driver's stopping line
// ends what is measured of it (its revokes on leaving are expected).
func Analyze(events map[string][]Event, partitions int32, from, to time.Time) Ownership {
	var res Ownership
	o := owners{by: map[int32]map[string]bool{}}
	stopped := map[string]bool{}
	last := from
	account := func(until time.Time) {
		if until.Before(last) || !until.After(from) {
			return
		}
		if until.After(to) {
			until = to
		}
		d := until.Sub(last)
		if d <= 0 {
			return
		}
		for p := range partitions {
			switch n := len(o.by[p]); {
			case n == 0:
				res.Unowned += d
			case n > 1:
				res.Double += d
			}
		}
		last = until
	}
	for _, e := range merge(events) {
		t := e.Time()
		if !t.Before(to) {
			break
		}
		account(t)
		if stopped[e.client] {
			continue
		}
		if !t.Before(from) {
			switch {
			case e.Ev == "lost" && len(e.Partitions) > 0, e.Ev == "exited":
				res.Lost++
			case e.Ev == "revoked" && len(e.Partitions) > 0:
				res.Revoked++
			}
		}
		if e.Ev == "stopping" {
			stopped[e.client] = true
			continue
		}
		o.apply(e.client, e.Event)
	}
	account(to)
	return res
}

// Settled reports whether the callbacks say every partition has exactly
// one owner and nothing has changed for quiet before now.
func Settled(events map[string][]Event, partitions int32, now time.Time, quiet time.Duration) bool {
	o := owners{by: map[int32]map[string]bool{}}
	var latest time.Time
	for _, e := range merge(events) {
		o.apply(e.client, e.Event)
		if e.Ev == "assigned" || e.Ev == "revoked" || e.Ev == "lost" || e.Ev == "exited" {
			latest = e.Time()
		}
	}
	for p := range partitions {
		if len(o.by[p]) != 1 {
			return false
		}
	}
	return now.Sub(latest) >= quiet
}
