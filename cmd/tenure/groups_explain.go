package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/tenure-dev/tenure/coordinator/adminapi"
)

func groupsExplain() groupsSubcommand {
	return groupsSubcommand{
		name: "explain",
		args: []string{"GROUP"},
		help: "the generation log: why each new epoch happened, who\n" +
			"came and went, each partition moved with its old and\n" +
			"new token, the fewest moves the change needed, and how\n" +
			"long the moved partitions had no owner. The newest\n" +
			"--limit entries, or --epoch N with every move",
		// The admin API alone: no Kafka request, so neither --brokers
		// nor TLS or SASL.
		reads: []string{"admin", "timeout", "output"},
		setup: func(fs *flag.FlagSet) groupsRun {
			epochN := fs.Int("epoch", 0, "explain: the log entry of this epoch, with every move")
			limit := fs.Int("limit", 10, "explain: how many of the newest log entries")
			return func(ctx context.Context, cl groupsClient, args []string) (result, error) {
				if *epochN < 0 || *limit <= 0 || *limit > 1000 {
					return nil, usagef("--epoch must not be negative, and --limit must be 1 to 1000")
				}
				ctx, cancel := cl.bound(ctx)
				defer cancel()
				return explainGroup(ctx, cl.api, args[0], int32(*epochN), *limit)
			}
		},
	}
}

// explained is the result of `groups explain`: the entries newest first.
type explained struct {
	Group   string              `json:"group"`
	Entries []adminapi.LogEntry `json:"entries"`
	all     bool                // every move, for --epoch
}

func (x *explained) writeTable(w io.Writer) {
	for i, e := range x.Entries {
		if i > 0 {
			fmt.Fprintln(w)
		}
		writeLogEntry(w, e, x.all)
	}
}

// explainGroup reads the group's generation log: the newest limit
// entries, or, with epoch > 0, that one entry.
func explainGroup(ctx context.Context, api *adminapi.Client, group string, epoch int32, limit int) (*explained, error) {
	var entries []adminapi.LogEntry
	var err error
	if epoch > 0 {
		entries, err = api.Log(ctx, group, epoch+1, 1)
		if err == nil && (len(entries) == 0 || entries[0].Epoch != epoch) {
			return nil, fmt.Errorf("group %q has no log entry for epoch %d (the log keeps the newest entries only)", group, epoch)
		}
	} else {
		entries, err = api.Log(ctx, group, 0, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("explain %s: %w", group, err)
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("group %q has no generation log: it never had a member, or does not exist", group)
	}
	return &explained{Group: group, Entries: entries, all: epoch > 0}, nil
}

// maxShownMoves is how many moves an entry shows unless asked for one
// epoch.
const maxShownMoves = 8

// writeLogEntry prints one entry for a person at 3 a.m.: why, who, what
// moved, what it cost.
func writeLogEntry(w io.Writer, e adminapi.LogEntry, allMoves bool) {
	fmt.Fprintf(w, "epoch %d  %s  %s\n", e.Epoch, e.Time.UTC().Format("2006-01-02 15:04:05.000 UTC"), explainReason(e.Reason))
	members := fmt.Sprintf("%d -> %d", e.MembersBefore, e.Members)
	if len(e.Joined) > 0 {
		members += "; joined " + strings.Join(e.Joined, ", ")
	}
	if len(e.Left) > 0 {
		members += "; left " + strings.Join(e.Left, ", ")
	}
	fmt.Fprintf(w, "  members   %s\n", members)
	if e.AfterFailover != nil {
		fmt.Fprintf(w, "  note      %s after the group was restored from the store (a coordinator restart or fail-over at %s)\n",
			e.Time.Sub(*e.AfterFailover).Round(time.Millisecond), e.AfterFailover.Format("15:04:05.000"))
	}
	if !e.Assigned {
		fmt.Fprintf(w, "  moves     not known yet: the leader has not sent its assignment\n")
		return
	}
	least := "fewest possible for a balanced assignment: n/a (members subscribe differently)"
	if e.MovesMin >= 0 {
		least = fmt.Sprintf("fewest possible for a balanced assignment: %d", e.MovesMin)
	}
	fmt.Fprintf(w, "  moves     %d (%s)\n", len(e.Moves), least)
	for i, m := range e.Moves {
		if !allMoves && i == maxShownMoves {
			fmt.Fprintf(w, "            ... and %d more (--epoch %d shows them all)\n", len(e.Moves)-i, e.Epoch)
			break
		}
		from, to := "nobody", "nobody"
		if m.From != "" {
			from = fmt.Sprintf("%s (token %d)", m.From, m.OldToken)
		}
		if m.To != "" {
			to = fmt.Sprintf("%s (token %d)", m.To, m.NewToken)
		}
		fmt.Fprintf(w, "            %s[%d]  %s -> %s\n", m.Topic, m.Partition, from, to)
	}
	h := e.Handoff
	switch {
	case len(e.Moves) == 0:
	case !h.Done:
		fmt.Fprintf(w, "  hand-off  in progress: %d of the moves granted so far\n", h.Granted)
	default:
		took := ""
		if h.Completed != nil {
			took = fmt.Sprintf(" in %s", h.Completed.Sub(e.Time).Round(time.Millisecond))
		}
		fmt.Fprintf(w, "  hand-off  done%s: %d granted", took, h.Granted)
		if h.Superseded > 0 {
			fmt.Fprintf(w, ", %d moved again by a later epoch", h.Superseded)
		}
		fmt.Fprintf(w, "; unowned %.3f partition-s in all, at most %s for one partition\n",
			h.UnownedPartitionSeconds, time.Duration(h.MaxUnownedSeconds*float64(time.Second)).Round(time.Millisecond))
	}
}

// reasonText says what each reason of the log means.
var reasonText = map[string]string{
	"member-joined":          "a member joined",
	"member-left":            "a member left (LeaveGroup, or a KIP-848 leave heartbeat)",
	"member-expired":         "a member's session expired (it stopped heartbeating: crash, pause or network)",
	"revocation-timeout":     "a member did not release revoked partitions within its rebalance timeout and was removed",
	"rebalance-timeout":      "a member did not rejoin within the rebalance timeout and was removed",
	"sync-timeout":           "members did not sync in time",
	"subscription-changed":   "a member changed its subscription",
	"assignor-changed":       "members asked for another server assignor",
	"topics-changed":         "subscribed topics appeared, changed or were deleted",
	"metadata-changed":       "a member rejoined with other protocols or metadata",
	"leader-rejoined":        "the classic leader rejoined",
	"static-member-rejoined": "a static member came back",
	"static-member-replaced": "a static member was replaced by a new instance",
	"drain":                  "an admin drained a member (tenure groups drain)",
	"undrain":                "an admin undrained a member",
	"admin-removal":          "an admin removed a member",
	"":                       "the group emptied",
}

func explainReason(reason string) string {
	var parts []string
	for _, r := range strings.Split(reason, ",") {
		if text, ok := reasonText[r]; ok {
			parts = append(parts, text)
		} else {
			parts = append(parts, r)
		}
	}
	return "why: " + strings.Join(parts, "; ")
}
