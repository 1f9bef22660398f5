package web

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"
)

// writeTimeout bounds each write to an event stream: a client that stops
// reading loses its stream instead of holding it.
const writeTimeout = 10 * time.Second

// keepAlive is the longest an event stream stays silent.
const keepAlive = 15 * time.Second

// events streams one group as server-sent events: a "group" event with
// the group's JSON (as GET /api/groups/{group} answers it) whenever it
// changes, and at least every refresh interval for the heartbeat ages;
// a "problem" event with an error's JSON while the group cannot be read
// (deleted, this node deposed), after which the stream goes on, so the
// page recovers when the group does. A missing group is a 404 before the
// stream starts.
func (h *Handler) events(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("group")
	select {
	case h.streams <- struct{}{}:
		defer func() { <-h.streams }()
	default:
		writeError(w, http.StatusServiceUnavailable, "too many event streams; poll instead", nil)
		return
	}
	select {
	case <-h.done:
		writeError(w, http.StatusServiceUnavailable, "shutting down", nil)
		return
	default:
	}
	v, err := h.src.GroupView(name)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	rc := http.NewResponseController(w)
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no") // a proxy must not hold events back
	w.WriteHeader(http.StatusOK)

	var (
		buf       bytes.Buffer
		lastKey   []byte // the last group sent, without its volatile fields
		lastSent  time.Time
		lastWrite time.Time
		problem   string
	)
	write := func(b []byte) bool {
		rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := w.Write(b); err != nil {
			return false
		}
		lastWrite = time.Now()
		return rc.Flush() == nil
	}
	send := func(event string, data []byte) bool {
		buf.Reset()
		buf.WriteString("event: ")
		buf.WriteString(event)
		buf.WriteString("\ndata: ")
		buf.Write(data) // JSON has no raw newline
		buf.WriteString("\n\n")
		return write(buf.Bytes())
	}
	// retry: how soon the browser reconnects a broken stream.
	if !write([]byte("retry: 1000\n\n")) {
		return
	}
	tick := time.NewTicker(h.cfg.sample)
	defer tick.Stop()
	for {
		if err == nil {
			g := toGroup(v)
			key := stableKey(g)
			if problem != "" || !bytes.Equal(key, lastKey) || time.Since(lastSent) >= h.cfg.refresh {
				data, _ := json.Marshal(g)
				if !send("group", data) {
					return
				}
				lastKey, lastSent, problem = key, time.Now(), ""
			}
		} else {
			_, msg, leader := h.problem(err)
			if msg != problem {
				data, _ := json.Marshal(errorJSON{Error: msg, Leader: leader})
				if !send("problem", data) {
					return
				}
				problem = msg
				lastKey = nil
			}
		}
		// A comment now and then keeps proxies from closing a quiet
		// stream (a group that stays unreadable sends nothing).
		if time.Since(lastWrite) >= keepAlive && !write([]byte(": keep-alive\n\n")) {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-h.done:
			return
		case <-tick.C:
		}
		v, err = h.src.GroupView(name)
	}
}

// stableKey is g's JSON without the heartbeat ages, which change on every
// read: two reads with the same key show the same group.
func stableKey(g groupJSON) []byte {
	ms := make([]memberJSON, len(g.Members))
	copy(ms, g.Members)
	for i := range ms {
		ms[i].HeartbeatAgeMs = 0
	}
	g.Members = ms
	b, _ := json.Marshal(g)
	return b
}
