package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/internal/adminapi"
)

// drainOpts are the flags of `tenure groups drain`.
type drainOpts struct {
	remove, undo, wait bool
	brokers            []string // for LeaveGroup (classic --remove)
}

// drainMember moves the member's partitions away: a KIP-848 member
// through the admin API (it stays, with nothing, unless remove), a classic
// one only by removing it with LeaveGroup, as Kafka's admin client does.
// With wait it returns once the hand-off is done, and prints the log
// entry.
func drainMember(ctx context.Context, adm *kadm.Client, api *adminapi.Client, w io.Writer, group, member string, o drainOpts) error {
	described, err := adm.DescribeConsumerGroups(ctx, group)
	if err != nil {
		return fmt.Errorf("drain: describe %s: %w", group, err)
	}
	g, ok := described[group]
	if !ok || errors.Is(g.Err, kerr.GroupIDNotFound) {
		return drainClassic(ctx, adm, w, group, member, o)
	}
	if g.Err != nil {
		return fmt.Errorf("drain: describe %s: %w", group, g.Err)
	}
	id := ""
	for _, m := range g.Members {
		if m.MemberID == member || m.InstanceID != nil && *m.InstanceID == member {
			id = m.MemberID
		}
	}
	if id == "" {
		return fmt.Errorf("drain: group %q has no member with ID or instance ID %q (tenure groups describe %s lists them)", group, member, group)
	}
	if o.undo {
		if err := api.Undrain(ctx, group, id); err != nil {
			return fmt.Errorf("undrain: %w", err)
		}
		fmt.Fprintf(w, "member %s of %s may be assigned partitions again\n", id, group)
		return nil
	}
	if err := api.Drain(ctx, group, id, o.remove); err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	if !o.wait {
		fmt.Fprintf(w, "drain of %s in %s started at epoch above %d\n", id, group, g.Epoch)
		return nil
	}
	entry, err := waitDrained(ctx, adm, api, group, id, g.Epoch, o.remove)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "drained %s from %s:\n\n", id, group)
	writeLogEntry(w, entry, true)
	return nil
}

// waitDrained polls the log until the drain's entry (the first "drain"
// entry above epoch after) is done and, with removed, the member is gone.
func waitDrained(ctx context.Context, adm *kadm.Client, api *adminapi.Client, group, id string, after int32, removed bool) (adminapi.LogEntry, error) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		log, err := api.Log(ctx, group, 0, 50)
		if err != nil {
			return adminapi.LogEntry{}, fmt.Errorf("drain: reading the log: %w", err)
		}
		for i := len(log) - 1; i >= 0; i-- {
			e := log[i]
			if e.Epoch <= after || e.Reason != "drain" || !e.Handoff.Done {
				continue
			}
			if !removed || !isMember(ctx, adm, group, id) {
				return e, nil
			}
		}
		select {
		case <-ctx.Done():
			return adminapi.LogEntry{}, fmt.Errorf("drain of %s requested, but its hand-off was not over within --timeout: its members heartbeat slowly, or one does not release (tenure groups explain %s shows the moves): %w", id, group, ctx.Err())
		case <-tick.C:
		}
	}
}

func isMember(ctx context.Context, adm *kadm.Client, group, id string) bool {
	d, err := adm.DescribeConsumerGroups(ctx, group)
	if err != nil {
		return true
	}
	for _, m := range d[group].Members {
		if m.MemberID == id {
			return true
		}
	}
	return false
}

// drainClassic removes a classic member with LeaveGroup: the coordinator
// cannot steer a classic group's assignment (its leader client computes
// it), so removal is the only graceful move: the group rebalances, and
// every member revokes before anything is reassigned.
func drainClassic(ctx context.Context, adm *kadm.Client, w io.Writer, group, member string, o drainOpts) error {
	classic, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return fmt.Errorf("drain: describe %s: %w", group, err)
	}
	g := classic[group]
	if g.Err != nil || g.State == "Dead" || g.State == "" {
		return fmt.Errorf("drain: group %q not found", group)
	}
	var target *kadm.DescribedGroupMember
	for i, m := range g.Members {
		if m.MemberID == member || m.InstanceID != nil && *m.InstanceID == member {
			target = &g.Members[i]
		}
	}
	if target == nil {
		return fmt.Errorf("drain: group %q has no member with ID or instance ID %q", group, member)
	}
	if !o.remove || o.undo {
		return fmt.Errorf("drain: %q is a classic group: its leader client computes the assignment, so the coordinator cannot move partitions off a member that stays; --remove removes %s with LeaveGroup (the group rebalances, revoking before it reassigns)", group, target.MemberID)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(o.brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group = group
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID, lm.InstanceID = target.MemberID, target.InstanceID
	lm.Reason = kmsg.StringPtr("tenure groups drain --remove: member was removed by an admin")
	req.Members = append(req.Members, lm)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("drain: LeaveGroup: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("drain: LeaveGroup: %w", err)
	}
	for _, m := range resp.Members {
		if err := kerr.ErrorForCode(m.ErrorCode); err != nil {
			return fmt.Errorf("drain: LeaveGroup of %s: %w", m.MemberID, err)
		}
	}
	fmt.Fprintf(w, "removed %s from classic group %s (LeaveGroup); the group rebalances\n", target.MemberID, group)
	return nil
}
