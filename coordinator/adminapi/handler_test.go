package adminapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/server"
)

// node is one node's admin API in these tests: its Drain answers what the
// test says, and remembers what it was asked and how.
type node struct {
	mu    sync.Mutex
	calls []string // "group/member remove=<bool> forwarded-by=<header>"
	err   func() error
	block chan struct{} // Drain waits for it to close, if not nil
	hs    *httptest.Server
	req   *http.Request // of the call in progress; set by the middleware below
}

func (n *node) Drain(group, member string, remove bool) error {
	n.mu.Lock()
	n.calls = append(n.calls, group+"/"+member+" remove="+map[bool]string{true: "true", false: "false"}[remove]+
		" forwarded-by="+n.req.Header.Get(ForwardedHeader))
	n.mu.Unlock()
	if n.block != nil {
		<-n.block
	}
	return n.err()
}

func (n *node) Undrain(group, member string) error { return n.Drain(group, member, false) }

func (n *node) called() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.calls...)
}

func startNode(t *testing.T, opts ...Opt) *node {
	n := &node{err: func() error { return nil }}
	mux := http.NewServeMux()
	Register(mux, n, append([]Opt{Logger(zaptest.NewLogger(t))}, opts...)...)
	// The handlers of one test run one at a time per node.
	n.hs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.mu.Lock()
		n.req = r
		n.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		if n.block != nil {
			close(n.block)
		}
		n.hs.Close()
	})
	return n
}

func (n *node) addr() string { return n.hs.Listener.Addr().String() }

func notCoordinator(id int32, httpAddr string) error {
	return &server.NotCoordinatorError{Leader: server.Node{ID: id, Addr: fmt.Sprintf("kafka-%d:9092", id), HTTP: httpAddr}, HasLeader: true}
}

// TestForward: a node that does not lead forwards a drain to the leader's
// admin API once, query and all, and passes the leader's answer on; it
// answers itself, with a message that says why, when the leader has no
// HTTP listener, when none leads, when the request was forwarded to it
// already, and (502) when the leader cannot be reached in time.
func TestForward(t *testing.T) {
	closedPort := func(t *testing.T) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		return addr
	}
	for _, tc := range []struct {
		name string
		// follower is what the node asked answers, given the leader's
		// and its own HTTP addresses; leader is what the leader
		// answers, given the follower's.
		follower    func(t *testing.T, leader string) error
		leader      func(follower string) error
		leaderBlock bool
		wantStatus  int
		wantCode    string
		wantMsg     string
		// wantLeader is what the leader was asked.
		wantLeader []string
	}{
		{
			name:       "forwarded to the leader",
			follower:   func(_ *testing.T, leader string) error { return notCoordinator(0, leader) },
			wantStatus: http.StatusOK,
			wantLeader: []string{"g/m remove=true forwarded-by=FOLLOWER"},
		},
		{
			name:       "the leader's error passed on",
			follower:   func(_ *testing.T, leader string) error { return notCoordinator(0, leader) },
			leader:     func(string) error { return coordinator.ErrUnknownMember },
			wantStatus: http.StatusNotFound, wantCode: "unknown_member",
			wantLeader: []string{"g/m remove=true forwarded-by=FOLLOWER"},
		},
		{
			name:       "a leader without --http",
			follower:   func(*testing.T, string) error { return notCoordinator(0, "") },
			wantStatus: http.StatusMisdirectedRequest, wantCode: "not_coordinator",
			wantMsg: "node 0 at kafka-0:9092 does, but serves no admin API (it runs without --http)",
		},
		{
			name:       "no leader",
			follower:   func(*testing.T, string) error { return &server.NotCoordinatorError{} },
			wantStatus: http.StatusMisdirectedRequest, wantCode: "not_coordinator",
			wantMsg: "no node coordinates the group now",
		},
		{
			name:       "forwarded once only",
			follower:   func(_ *testing.T, leader string) error { return notCoordinator(0, leader) },
			leader:     func(follower string) error { return notCoordinator(1, follower) },
			wantStatus: http.StatusMisdirectedRequest, wantCode: "not_coordinator",
			wantMsg:    "node 1 at kafka-1:9092 does; the request was forwarded here by another node, and is not forwarded twice",
			wantLeader: []string{"g/m remove=true forwarded-by=FOLLOWER"},
		},
		{
			name:       "an unreachable leader",
			follower:   func(t *testing.T, _ string) error { return notCoordinator(0, closedPort(t)) },
			wantStatus: http.StatusBadGateway, wantCode: "unavailable",
			wantMsg: "forwarding the request to its admin API at",
		},
		{
			name:        "a leader that does not answer in time",
			follower:    func(_ *testing.T, leader string) error { return notCoordinator(0, leader) },
			leaderBlock: true,
			wantStatus:  http.StatusBadGateway, wantCode: "unavailable",
			wantMsg:    "failed: no answer within 300ms",
			wantLeader: []string{"g/m remove=true forwarded-by=FOLLOWER"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leader := startNode(t)
			follower := startNode(t, ForwardTimeout(300*time.Millisecond))
			if tc.leader != nil {
				leader.err = func() error { return tc.leader(follower.addr()) }
			}
			if tc.leaderBlock {
				leader.block = make(chan struct{})
			}
			ferr := tc.follower(t, leader.addr())
			follower.err = func() error { return ferr }

			c := &Client{Base: follower.hs.URL}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := c.Drain(ctx, "g", "m", true)
			var apiErr *Error
			switch {
			case tc.wantStatus == http.StatusOK && err != nil:
				t.Fatalf("Drain: %v", err)
			case tc.wantStatus != http.StatusOK && !errors.As(err, &apiErr):
				t.Fatalf("Drain: %v, want a %d", err, tc.wantStatus)
			case apiErr != nil && (apiErr.Status != tc.wantStatus || apiErr.Code != tc.wantCode || !strings.Contains(apiErr.Msg, tc.wantMsg)):
				t.Fatalf("Drain: %d %s %q, want %d %s with %q", apiErr.Status, apiErr.Code, apiErr.Msg, tc.wantStatus, tc.wantCode, tc.wantMsg)
			}
			if got := follower.called(); len(got) != 1 || got[0] != "g/m remove=true forwarded-by=" {
				t.Errorf("the follower was asked %q, want once, by the client", got)
			}
			var want []string
			for _, w := range tc.wantLeader {
				want = append(want, strings.ReplaceAll(w, "FOLLOWER", follower.addr()))
			}
			if got := leader.called(); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("the leader was asked %q, want %q", got, want)
			}
		})
	}
}

// TestForwardedAnswer: the answer of a forwarded request says which admin
// API gave it, and a client that marks its request as forwarded gets the
// node's own answer.
func TestForwardedAnswer(t *testing.T) {
	leader := startNode(t)
	follower := startNode(t)
	follower.err = func() error { return notCoordinator(0, leader.addr()) }
	for _, tc := range []struct {
		name       string
		header     string
		wantStatus int
		wantTo     string
	}{
		{"forwarded", "", http.StatusOK, leader.addr()},
		{"marked by the client", "client", http.StatusMisdirectedRequest, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, follower.hs.URL+"/api/groups/g/members/m/undrain", nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.header != "" {
				req.Header.Set(ForwardedHeader, tc.header)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.wantStatus || resp.Header.Get(ForwardedToHeader) != tc.wantTo {
				t.Fatalf("%d, %s %q; want %d, %q", resp.StatusCode, ForwardedToHeader, resp.Header.Get(ForwardedToHeader), tc.wantStatus, tc.wantTo)
			}
		})
	}
}
