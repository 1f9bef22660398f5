package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/coordinator/adminapi"
)

func groupsDrain() groupsSubcommand {
	return groupsSubcommand{
		name: "drain",
		args: []string{"GROUP", "[MEMBER]"},
		help: "move a KIP-848 member's partitions to the others,\n" +
			"revoking before assigning, under fresh tokens; the\n" +
			"member stays with nothing (--undo reverses it), or,\n" +
			"named with --remove MEMBER instead, is removed once it\n" +
			"holds nothing. A classic member can only be removed\n" +
			"(--remove, with LeaveGroup). Waits for the hand-off\n" +
			"(--wait) and prints it. MEMBER: a member or instance ID;\n" +
			"one that begins with '-' goes after --: drain g -- -xYz",
		// The admin API drains; the Kafka protocol describes the group and
		// removes a classic member.
		reads: groupsKafkaFlags("admin", "remove"),
		setup: func(fs *flag.FlagSet) groupsRun {
			undo := fs.Bool("undo", false, "drain: let a drained member be assigned partitions again")
			wait := fs.Bool("wait", true, "drain: wait for the hand-off to finish (bounded by --timeout) and print it")
			return func(ctx context.Context, cl groupsClient, args []string) (result, error) {
				o := drainOpts{undo: *undo, wait: *wait, clientOpts: cl.clientOpts}
				switch {
				case len(args) == 2 && len(cl.remove) == 0:
					o.member = args[1]
				case len(args) == 1 && len(cl.remove) == 1:
					o.member, o.remove = cl.remove[0], true
				default:
					return nil, usagef("drain takes GROUP MEMBER, or GROUP --remove MEMBER (one member)")
				}
				if o.undo && o.remove {
					return nil, usagef("--undo and --remove do not go together")
				}
				ctx, cancel := cl.bound(ctx)
				defer cancel()
				return drainMember(ctx, cl.adm, cl.api, args[0], o)
			}
		},
	}
}

// drainOpts are the flags of `tenure groups drain`.
type drainOpts struct {
	member             string
	remove, undo, wait bool
	clientOpts         []kgo.Opt // for LeaveGroup (classic --remove)
}

// drained is the result of `groups drain`.
type drained struct {
	Group  string `json:"group"`
	Member string `json:"member"`
	// Action is "drained", "draining" (not waited for), "undrained" or
	// "removed".
	Action string `json:"action"`
	// Entry is the drain's generation log entry, once its hand-off is
	// done (KIP-848, waited for).
	Entry *adminapi.LogEntry `json:"entry"`
	note  string
}

func (d *drained) writeTable(w io.Writer) {
	if d.note != "" {
		fmt.Fprintln(w, d.note)
	}
	if d.Entry != nil {
		fmt.Fprintln(w)
		writeLogEntry(w, *d.Entry, false)
	}
}

// drainMember moves the member's partitions away: a KIP-848 member
// through the admin API (it stays, with nothing, unless remove), a classic
// one only by removing it with LeaveGroup, as Kafka's admin client does.
// With wait it returns once the hand-off is done, and prints the log
// entry.
func drainMember(ctx context.Context, adm *kadm.Client, api *adminapi.Client, group string, o drainOpts) (*drained, error) {
	member := o.member
	described, err := adm.DescribeConsumerGroups(ctx, group)
	if err != nil {
		return nil, fmt.Errorf("drain: describe %s: %w", group, err)
	}
	g, ok := described[group]
	if !ok || errors.Is(g.Err, kerr.GroupIDNotFound) {
		return drainClassic(ctx, adm, group, member, o)
	}
	if g.Err != nil {
		return nil, fmt.Errorf("drain: describe %s: %w", group, g.Err)
	}
	id := ""
	for _, m := range g.Members {
		if m.MemberID == member || m.InstanceID != nil && *m.InstanceID == member {
			id = m.MemberID
		}
	}
	if id == "" {
		return nil, fmt.Errorf("drain: group %q has no member with ID or instance ID %q (tenure groups describe %s lists them)", group, member, group)
	}
	d := &drained{Group: group, Member: id}
	if o.undo {
		if err := api.Undrain(ctx, group, id); err != nil {
			return nil, fmt.Errorf("undrain: %w", err)
		}
		d.Action, d.note = "undrained", fmt.Sprintf("member %s of %s may be assigned partitions again", id, group)
		return d, nil
	}
	if err := api.Drain(ctx, group, id, o.remove); err != nil {
		return nil, fmt.Errorf("drain: %w", err)
	}
	if !o.wait {
		d.Action, d.note = "draining", fmt.Sprintf("drain of %s in %s started after epoch %d", id, group, g.Epoch)
		return d, nil
	}
	entry, err := waitDrained(ctx, adm, api, group, id, g.Epoch, o.remove)
	if err != nil {
		return nil, err
	}
	d.Action, d.Entry = "drained", &entry
	d.note = fmt.Sprintf("drained %s from %s", id, group)
	if o.remove {
		d.Action, d.note = "removed", fmt.Sprintf("drained %s from %s, then removed it", id, group)
	}
	return d, nil
}

// waitDrained polls the log until the drain's entry (the first "drain"
// entry above epoch after) is done and, with removed, the member is gone.
// A deadline that ends during a read is the hand-off's timeout, said with
// what the last read saw: each poll is a read in flight most of the time
// under load, and "reading the log: context deadline exceeded" hid that
// the hand-off was the slow part.
func waitDrained(ctx context.Context, adm *kadm.Client, api *adminapi.Client, group, id string, after int32, removed bool) (adminapi.LogEntry, error) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	seen := fmt.Sprintf("no drain entry above epoch %d in the log yet", after)
	for {
		log, err := api.Log(ctx, group, 0, 50)
		if err != nil && ctx.Err() == nil {
			return adminapi.LogEntry{}, fmt.Errorf("drain: reading the log: %w", err)
		}
		for i := len(log) - 1; err == nil && i >= 0; i-- {
			e := log[i]
			if e.Epoch <= after || e.Reason != "drain" {
				continue
			}
			if !e.Handoff.Done {
				seen = fmt.Sprintf("the drain's entry (epoch %d) has %d of %d moves granted and %d superseded",
					e.Epoch, e.Handoff.Granted, len(e.Moves), e.Handoff.Superseded)
				continue
			}
			if !removed || !isMember(ctx, adm, group, id) {
				return e, nil
			}
			seen = fmt.Sprintf("the drain's hand-off (epoch %d) is done, but the member is still in the group", e.Epoch)
		}
		select {
		case <-ctx.Done():
			return adminapi.LogEntry{}, fmt.Errorf("drain of %s requested, but its hand-off was not over within --timeout (%s): its members heartbeat slowly, or one does not release (tenure groups explain %s shows the moves): %w", id, seen, group, ctx.Err())
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
func drainClassic(ctx context.Context, adm *kadm.Client, group, member string, o drainOpts) (*drained, error) {
	classic, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return nil, fmt.Errorf("drain: describe %s: %w", group, err)
	}
	g := classic[group]
	if g.Err != nil || g.State == "Dead" || g.State == "" {
		return nil, fmt.Errorf("drain: group %q not found", group)
	}
	var target *kadm.DescribedGroupMember
	for i, m := range g.Members {
		if m.MemberID == member || m.InstanceID != nil && *m.InstanceID == member {
			target = &g.Members[i]
		}
	}
	if target == nil {
		return nil, fmt.Errorf("drain: group %q has no member with ID or instance ID %q", group, member)
	}
	if !o.remove || o.undo {
		return nil, fmt.Errorf("drain: %q is a classic group: its leader client computes the assignment, so the coordinator cannot move partitions off a member that stays; --remove removes %s with LeaveGroup (the group rebalances, revoking before it reassigns)", group, target.MemberID)
	}
	cl, err := kgo.NewClient(o.clientOpts...)
	if err != nil {
		return nil, err
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
		return nil, fmt.Errorf("drain: LeaveGroup: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("drain: LeaveGroup: %w", err)
	}
	for _, m := range resp.Members {
		if err := kerr.ErrorForCode(m.ErrorCode); err != nil {
			return nil, fmt.Errorf("drain: LeaveGroup of %s: %w", m.MemberID, err)
		}
	}
	return &drained{Group: group, Member: target.MemberID, Action: "removed",
		note: fmt.Sprintf("removed %s from classic group %s (LeaveGroup); the group rebalances", target.MemberID, group)}, nil
}
