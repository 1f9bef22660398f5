package e2e

import (
	"context"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFleetHeartbeatNeedingNoRoom: with its lane's room in flight all
// taken, a member whose heartbeat falls due to a node the lane has no
// connection to (a dead node) is sent at once, fails, and waits for its
// group's lookup, instead of waiting behind the heartbeats that wait for
// room, as a stock client's would not; one due to a node with a
// connection up waits for room.
func TestFleetHeartbeatNeedingNoRoom(t *testing.T) {
	t.Parallel()
	gone, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := gone.Addr().String()
	gone.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		// A live node that reads and never answers.
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(io.Discard, c)
			}()
		}
	}()
	f := newFleet(t, fleetConfig{addrs: []string{dead, ln.Addr().String()}, topic: "t", partitions: 1, groups: 2, prefix: "room",
		members: func(int) int { return 1 }, perLane: 2, inFlight: 1, timeout: 5 * time.Second})
	// The lanes do not run: the test turns the wheel itself.
	f.base = time.Now()
	f.ctx, f.cancel = context.WithCancel(context.Background())
	t.Cleanup(f.stop)
	l := f.lanes[0]
	gDead, gLive := f.groups[0], f.groups[1]
	mDead, mLive := gDead.members[0], gLive.members[0]

	l.mu.Lock()
	defer l.mu.Unlock()
	l.joining = nil
	gDead.coord, gLive.coord = 0, 1
	for _, m := range []*fleetMember{mDead, mLive} {
		m.epoch, m.reported = 1, true
	}
	// The lane's connection to the live node is up and its one request
	// in flight takes all the room.
	if err := l.wires[1].send(kmsg.NewPtrApiVersionsRequest(), func(kmsg.Response, error) {}); err != nil {
		t.Fatal(err)
	}
	l.inFlight = 1
	now := time.Since(f.base)
	l.requeueLocked(mDead, now)
	l.requeueLocked(mLive, now)
	l.turnLocked(now + f.cfg.tickLen())

	if slices.Contains(l.ready, mDead) {
		t.Fatal("the member due to the dead node waits for room in flight")
	}
	gDead.mu.Lock()
	parked, coord, lost := slices.Contains(gDead.waiters, mDead), gDead.coord, gDead.curOut.lost
	gDead.mu.Unlock()
	if !parked || coord != -1 || lost.IsZero() {
		t.Fatalf("the member due to the dead node: waiting for its group's lookup %v, the group's coordinator %d, its loss noted %v; want it waiting, none, noted",
			parked, coord, !lost.IsZero())
	}
	if !slices.Contains(l.ready, mLive) {
		t.Fatal("the member due to the live node was sent without room in flight")
	}
}
