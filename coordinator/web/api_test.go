package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/server"
	"github.com/tenure-dev/tenure/coordinator/web"
)

// The API's JSON as a client reads it (docs/STATUS-PAGE.md).
type (
	apiNode struct {
		ID   int32  `json:"id"`
		Addr string `json:"addr"`
	}
	apiGroups struct {
		Node    apiNode  `json:"node"`
		Leading bool     `json:"leading"`
		Leader  *apiNode `json:"leader"`
		Groups  []struct {
			Name    string `json:"name"`
			Type    string `json:"type"`
			State   string `json:"state"`
			Epoch   int32  `json:"epoch"`
			Members int    `json:"members"`
			Owned   int    `json:"owned"`
			Unowned int    `json:"unowned"`
		} `json:"groups"`
	}
	apiGroup struct {
		Name     string `json:"name"`
		Type     string `json:"type"`
		State    string `json:"state"`
		Epoch    int32  `json:"epoch"`
		Protocol string `json:"protocol"`
		Members  []struct {
			ID               string `json:"id"`
			ClientID         string `json:"client_id"`
			Epoch            int32  `json:"epoch"`
			State            string `json:"state"`
			HeartbeatAgeMs   int64  `json:"heartbeat_age_ms"`
			SessionTimeoutMs int64  `json:"session_timeout_ms"`
			Partitions       int    `json:"partitions"`
		} `json:"members"`
		Topics []struct {
			Name       string `json:"name"`
			Partitions []struct {
				Partition int32  `json:"partition"`
				Owner     string `json:"owner"`
				Token     int64  `json:"token"`
				Target    string `json:"target"`
			} `json:"partitions"`
		} `json:"topics"`
		Owned   int `json:"owned"`
		Unowned int `json:"unowned"`
	}
	apiError struct {
		Error  string   `json:"error"`
		Leader *apiNode `json:"leader"`
	}
)

// hostileNames are group names a client may choose: they must reach the
// API intact through a URL path.
var hostileNames = []string{"a/b", "100%", "<img src=x onerror=alert(1)>", "two words", "ü?#&=", "..a", "-"}

// TestAPI reads groups made by raw KIP-848 heartbeats through the JSON
// endpoints: names of any shape, a missing group, bad input, and the
// generation log.
func TestAPI(t *testing.T) {
	srv, addr := startTenure(t, 4)
	createTopic(t, addr, "work", 4)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgoLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	groups := append([]string{"g"}, hostileNames...)
	for _, g := range groups {
		join(t, cl, g, "member-a", "work")
	}
	hs := startPage(t, web.New(web.ServerSource{Server: srv}, web.Logger(testLogger(t))))

	var list apiGroups
	if resp := getJSON(t, hs, "/api/groups", &list); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/groups: %s", resp.Status)
	}
	if !list.Leading || list.Leader == nil || list.Leader.Addr != addr || list.Node.Addr != addr {
		t.Errorf("node %+v leading %v leader %+v; want this node, leading, at %s", list.Node, list.Leading, list.Leader, addr)
	}
	var names []string
	for _, g := range list.Groups {
		names = append(names, g.Name)
		if g.Type != "consumer" || g.Members != 1 || g.Epoch != 1 || g.Owned != 4 || g.Unowned != 0 {
			t.Errorf("group %+v", g)
		}
	}
	want := slices.Sorted(slices.Values(groups))
	if !slices.Equal(names, want) {
		t.Errorf("groups %q, want %q", names, want)
	}

	for _, name := range groups {
		var g apiGroup
		if resp := getJSON(t, hs, groupPath(name), &g); resp.StatusCode != http.StatusOK {
			t.Errorf("GET group %q: %s", name, resp.Status)
			continue
		}
		if g.Name != name || g.Type != "consumer" || g.Protocol != "uniform" || len(g.Members) != 1 || g.Members[0].ID != "member-a" ||
			g.Members[0].Partitions != 4 || g.Members[0].SessionTimeoutMs != testSession.Milliseconds() {
			t.Errorf("group %q: %+v", name, g)
		}
		if len(g.Topics) != 1 || g.Topics[0].Name != "work" || len(g.Topics[0].Partitions) != 4 {
			t.Fatalf("group %q topics: %+v", name, g.Topics)
		}
		for i, p := range g.Topics[0].Partitions {
			if p.Partition != int32(i) || p.Owner != "member-a" || p.Token != 1 {
				t.Errorf("group %q partition %+v", name, p)
			}
		}
	}

	for _, tc := range []struct {
		path   string
		status int
		want   string
	}{
		{groupPath("nope"), http.StatusNotFound, "no such group"},
		{groupPath("g") + "/log?before=0", http.StatusBadRequest, "before"},
		{groupPath("g") + "/log?limit=0", http.StatusBadRequest, "limit"},
		{groupPath("g") + "/log?limit=many", http.StatusBadRequest, "limit"},
		{groupPath("g") + "/log?limit=1001", http.StatusBadRequest, "limit"},
		{"/api/nope", http.StatusNotFound, "no such endpoint"},
		{groupPath("g") + "/members", http.StatusNotFound, "no such endpoint"},
	} {
		var e apiError
		if resp := getJSON(t, hs, tc.path, &e); resp.StatusCode != tc.status || !strings.Contains(e.Error, tc.want) {
			t.Errorf("GET %s: %s %q, want %d %q", tc.path, resp.Status, e.Error, tc.status, tc.want)
		}
	}

	// The generation log: the join that made the epoch, then nothing
	// before it.
	for path, want := range map[string]int{groupPath("g") + "/log": 1, groupPath("g") + "/log?limit=5": 1, groupPath("g") + "/log?before=1": 0} {
		var log []web.LogEntry
		if resp := getJSON(t, hs, path, &log); resp.StatusCode != http.StatusOK || len(log) != want {
			t.Fatalf("GET %s: %s %+v", path, resp.Status, log)
		}
		if want == 1 && (log[0].Reason != "member-joined" || log[0].Epoch != 1 || len(log[0].Moves) != 4 || log[0].MovesMin != 4 ||
			!log[0].Handoff.Done || len(log[0].Joined) != 1 || log[0].Joined[0] != "member-a") {
			t.Errorf("GET %s: %+v", path, log[0])
		}
	}

	resp, err := hs.Client().Post(hs.URL+"/api/groups", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /api/groups: %s", resp.Status)
	}
}

// TestStatic: the page and its files, with a policy that lets no script
// from elsewhere run.
func TestStatic(t *testing.T) {
	hs := startPage(t, web.New(followerSource{}))
	for _, tc := range []struct {
		path, contentType, want string
		status                  int
	}{
		{"/", "text/html; charset=utf-8", `<script src="/static/app.js" defer></script>`, http.StatusOK},
		{"/static/app.js", "text/javascript; charset=utf-8", "textContent", http.StatusOK},
		{"/static/style.css", "text/css; charset=utf-8", ".cell.unowned", http.StatusOK},
		{"/static/index.html", "", "", http.StatusNotFound},
		{"/static/nope.js", "", "", http.StatusNotFound},
		{"/nope", "", "", http.StatusNotFound},
	} {
		resp, err := hs.Client().Get(hs.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("GET %s: %s, want %d", tc.path, resp.Status, tc.status)
			continue
		}
		if tc.status != http.StatusOK {
			continue
		}
		if ct := resp.Header.Get("Content-Type"); ct != tc.contentType {
			t.Errorf("GET %s: Content-Type %q, want %q", tc.path, ct, tc.contentType)
		}
		if !strings.Contains(string(body), tc.want) {
			t.Errorf("GET %s lacks %q", tc.path, tc.want)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("GET %s: Content-Security-Policy %q", tc.path, csp)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no nosniff", tc.path)
		}
	}
}

// followerSource is a node of an HA set that does not lead: node 1,
// following node 2. The server's side of it is TestStatusFollower in
// package server.
type followerSource struct{ noLeader bool }

func (f followerSource) Leadership() server.Leadership {
	l := server.Leadership{Self: server.Node{ID: 1, Addr: "10.0.0.1:9092"}}
	if !f.noLeader {
		l.Leader, l.LeaderKnown = server.Node{ID: 2, Addr: "10.0.0.2:9092"}, true
	}
	return l
}
func (followerSource) Groups() ([]coordinator.GroupSummary, error) { return nil, server.ErrNotLeading }
func (followerSource) GroupView(string) (coordinator.GroupView, error) {
	return coordinator.GroupView{}, server.ErrNotLeading
}
func (followerSource) GenerationLog(context.Context, string, int32, int) ([]web.LogEntry, error) {
	return nil, server.ErrNotLeading
}

// TestFollower: a node that does not lead lists no group and names the
// leader, in the list and in every error.
func TestFollower(t *testing.T) {
	hs := startPage(t, web.New(followerSource{}))
	var list apiGroups
	if resp := getJSON(t, hs, "/api/groups", &list); resp.StatusCode != http.StatusOK || list.Leading ||
		list.Leader == nil || list.Leader.ID != 2 || len(list.Groups) != 0 || list.Groups == nil {
		t.Fatalf("GET /api/groups: %s %+v", resp.Status, list)
	}
	for _, path := range []string{groupPath("g"), groupPath("g") + "/log", groupPath("g") + "/events"} {
		var e apiError
		resp := getJSON(t, hs, path, &e)
		if resp.StatusCode != http.StatusServiceUnavailable || e.Error != "this node follows; the leader is node 2 at 10.0.0.2:9092" ||
			e.Leader == nil || e.Leader.Addr != "10.0.0.2:9092" {
			t.Errorf("GET %s: %s %+v", path, resp.Status, e)
		}
	}
	hs = startPage(t, web.New(followerSource{noLeader: true}))
	var e apiError
	if resp := getJSON(t, hs, groupPath("g"), &e); resp.StatusCode != http.StatusServiceUnavailable ||
		!strings.Contains(e.Error, "election") || e.Leader != nil {
		t.Errorf("during an election: %s %+v", resp.Status, e)
	}
}

// shardSource coordinates some groups (shards) but not the one asked for,
// whose shard node 3 owns: node 1 of a set of 6 shards, coordinating
// shards 0 and 3 (none if idle).
type shardSource struct {
	followerSource
	idle bool
}

func (s shardSource) Leadership() server.Leadership {
	st := &server.ShardStatus{Count: 6, Coordinating: []int{0, 3}}
	if s.idle {
		st.Coordinating = []int{}
	}
	return server.Leadership{Self: server.Node{ID: 1, Addr: "10.0.0.1:9092"}, Leading: !s.idle, Shards: st}
}

func (shardSource) GroupView(string) (coordinator.GroupView, error) {
	return coordinator.GroupView{}, &server.NotCoordinatorError{Leader: server.Node{ID: 3, Addr: "10.0.0.3:9092"}, HasLeader: true}
}

// TestGroupOnAnotherShard: a group that another node's shard holds names
// that node, not the set's leader.
func TestGroupOnAnotherShard(t *testing.T) {
	hs := startPage(t, web.New(shardSource{}))
	var e apiError
	if resp := getJSON(t, hs, groupPath("g"), &e); resp.StatusCode != http.StatusServiceUnavailable ||
		e.Error != "node 3 at 10.0.0.3:9092 coordinates the group" || e.Leader == nil || e.Leader.ID != 3 {
		t.Errorf("GET a group of another shard: %s %+v", resp.Status, e)
	}
}

// TestShardStatus: with shards no node leads, so the node's status names
// no leader and says nothing of leading: it lists the shards the node
// coordinates. Before, a node holding shards said "leading": true beside
// another node as "leader" (shard 0's owner). One-leader mode keeps both
// fields (TestFollower, TestAPI).
func TestShardStatus(t *testing.T) {
	for _, tc := range []struct {
		src  shardSource
		want string
	}{
		{shardSource{}, `{"node":{"id":1,"addr":"10.0.0.1:9092"},"shards":{"count":6,"coordinating":[0,3]},"groups":[]}`},
		{shardSource{idle: true}, `{"node":{"id":1,"addr":"10.0.0.1:9092"},"shards":{"count":6,"coordinating":[]},"groups":[]}`},
	} {
		hs := startPage(t, web.New(tc.src))
		resp, err := http.Get(hs.URL + "/api/groups")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(body)); got != tc.want {
			t.Errorf("GET /api/groups:\n got %s\nwant %s", got, tc.want)
		}
	}
	hs := startPage(t, web.New(followerSource{noLeader: true}))
	resp, err := http.Get(hs.URL + "/api/groups")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"leading":false,"leader":null`) || strings.Contains(string(body), "shards") {
		t.Errorf("one-leader mode during an election: %s", body)
	}
}

// TestEvents follows a group through its event stream: the group as it
// is, then as it changes, without asking again; a stream of a missing
// group is refused, streams beyond the limit too, and Close ends them.
func TestEvents(t *testing.T) {
	srv, addr := startTenure(t, 4)
	createTopic(t, addr, "work", 4)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgoLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const group = "a/b <c>"
	join(t, cl, group, "member-a", "work")
	h := web.New(web.ServerSource{Server: srv}, web.Logger(testLogger(t)), web.SampleInterval(10*time.Millisecond),
		web.RefreshInterval(time.Hour), web.MaxStreams(1))
	hs := startPage(t, h)

	if resp := getJSON(t, hs, groupPath("nope")+"/events", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("events of a missing group: %s", resp.Status)
	}
	resp, events := openEvents(t, hs, groupPath(group)+"/events")
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("events: %s %q", resp.Status, ct)
	}
	read := func() apiGroup {
		t.Helper()
		ev, err := events.next()
		if err != nil {
			t.Fatal(err)
		}
		var g apiGroup
		if ev.name != "group" {
			t.Fatalf("event %q: %s", ev.name, ev.data)
		}
		if err := json.Unmarshal([]byte(ev.data), &g); err != nil {
			t.Fatalf("%v: %s", err, ev.data)
		}
		return g
	}
	if g := read(); g.Name != group || len(g.Members) != 1 || g.Epoch != 1 {
		t.Fatalf("first event: %+v", g)
	}

	// Beyond MaxStreams: refused, and the page polls.
	var e apiError
	if resp := getJSON(t, hs, groupPath(group)+"/events", &e); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a second stream: %s %+v", resp.Status, e)
	}

	// A change is pushed without being asked for; an unchanged group is
	// not sent again (RefreshInterval is an hour).
	join(t, cl, group, "member-b", "work")
	if g := read(); g.Epoch != 2 || len(g.Members) != 2 {
		t.Fatalf("after a join: %+v", g)
	}
	leave(t, cl, group, "member-b")
	leave(t, cl, group, "member-a")
	var g apiGroup
	for g = read(); len(g.Members) != 0; g = read() {
	}
	if g.State != "Empty" || g.Unowned != 0 {
		t.Errorf("after both left: %+v", g)
	}

	// Close ends the stream.
	h.Close()
	for {
		if _, err := events.next(); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Errorf("stream ended with %v, want EOF", err)
			}
			break
		}
	}
}
