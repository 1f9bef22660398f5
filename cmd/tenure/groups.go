package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tenure-dev/tenure/internal/adminapi"
)

// groupsCommand is `tenure groups`: group administration over the Kafka
// protocol, against tenure or any Kafka cluster.
func groupsCommand() *command {
	return &command{
		name:    "groups",
		summary: "administer groups: list, describe, offsets, delete (Kafka protocol, as kadm)",
		help: `Subcommands (tenure groups [flags] <subcommand> [GROUP]):

  list              every group, with its type (classic or consumer), state
                    and protocol type
  describe GROUP    state, epoch, assignor, and each member with its epoch
                    and assigned partitions (KIP-848 groups through
                    ConsumerGroupDescribe, classic groups through
                    DescribeGroups)
  offsets GROUP     the committed offset of each partition
  delete GROUP      delete a group that has no members, with its offsets
  explain GROUP     the generation log: why each new epoch happened, who
                    came and went, each partition moved with its old and
                    new token, the fewest moves the change needed, and how
                    long the moved partitions had no owner (--limit
                    entries, or --epoch N with every move); admin API
  drain GROUP MEMBER
                    move a KIP-848 member's partitions to the others,
                    revoking before assigning, with fresh tokens; the
                    member stays with nothing (--undo reverses it) or,
                    with --remove, is removed once it holds nothing. A
                    classic member can only be removed (--remove, with
                    LeaveGroup). Waits for the hand-off and prints it.
                    MEMBER is a member ID or an instance ID; admin API

explain and drain use the admin API on the coordinator's --http listener
(--admin); the others, the Kafka protocol (--brokers). Flags may come
before or after the subcommand. Tables are sorted.`,
		setup: setupGroups,
	}
}

func setupGroups(fs *flag.FlagSet) func(ctx context.Context, args []string) error {
	admin := addAdminFlags(fs)
	var (
		adminURL = fs.String("admin", "http://127.0.0.1:8092", "`URL` of the coordinator's --http listener, for explain and drain")
		epochN   = fs.Int("epoch", 0, "explain: the log entry of this epoch, with every move")
		limit    = fs.Int("limit", 10, "explain: how many of the newest log entries")
		remove   = fs.Bool("remove", false, "drain: remove the member once it holds nothing (classic: remove it at once, with LeaveGroup)")
		undo     = fs.Bool("undo", false, "drain: let a drained member be assigned partitions again")
		wait     = fs.Bool("wait", true, "drain: wait for the hand-off to finish (bounded by --timeout) and print it")
	)
	return func(ctx context.Context, args []string) error {
		// Flags after the subcommand (tenure groups describe g --brokers
		// x) are parsed here; the command line still wins over the
		// environment, which was applied to unset flags only.
		args, err := parseInterleaved(fs, args)
		if err != nil {
			return err
		}
		if len(args) == 0 {
			return usagef("missing subcommand: list, describe, offsets or delete")
		}
		sub, args := args[0], args[1:]
		want := 1
		switch sub {
		case "list":
			want = 0
		case "describe", "offsets", "delete", "explain":
		case "drain":
			want = 2
		default:
			return usagef("unknown subcommand %q: list, describe, offsets, delete, explain or drain", sub)
		}
		if len(args) != want {
			switch want {
			case 0:
				return usagef("list takes no argument, got %q", args)
			case 2:
				return usagef("drain takes GROUP MEMBER, got %q", args)
			}
			return usagef("%s takes one GROUP, got %q", sub, args)
		}
		if *epochN < 0 || *limit <= 0 {
			return usagef("--epoch must not be negative and --limit must be positive")
		}
		api := &adminapi.Client{Base: *adminURL}
		if sub == "explain" {
			ctx, cancel := context.WithTimeout(ctx, *admin.timeout)
			defer cancel()
			return explainGroup(ctx, api, os.Stdout, args[0], int32(*epochN), *limit)
		}
		adm, ctx, done, err := admin.connect(ctx)
		if err != nil {
			return err
		}
		defer done()
		if sub == "drain" {
			return drainMember(ctx, adm, api, os.Stdout, args[0], args[1],
				drainOpts{remove: *remove, undo: *undo, wait: *wait, brokers: splitList(*admin.brokers)})
		}
		return runGroups(ctx, adm, os.Stdout, sub, args)
	}
}

// parseInterleaved parses flags found anywhere in args and returns the
// positional arguments, in order.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	out := fs.Output()
	fs.SetOutput(io.Discard) // flagError says it, once
	defer fs.SetOutput(out)
	for {
		if err := fs.Parse(args); err != nil {
			return nil, flagError(fs, err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos, args = append(pos, args[0]), args[1:]
	}
}

// runGroups runs one subcommand (validated by the caller) and writes its
// table to w.
func runGroups(ctx context.Context, adm *kadm.Client, w io.Writer, sub string, args []string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	var err error
	switch sub {
	case "list":
		err = listGroups(ctx, adm, tw)
	case "describe":
		err = describeGroup(ctx, adm, tw, args[0])
	case "offsets":
		err = groupOffsets(ctx, adm, tw, args[0])
	case "delete":
		err = deleteGroup(ctx, adm, tw, args[0])
	default:
		return usagef("unknown subcommand %q", sub)
	}
	if ferr := tw.Flush(); err == nil {
		err = ferr
	}
	return err
}

func listGroups(ctx context.Context, adm *kadm.Client, w io.Writer) error {
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		return fmt.Errorf("list groups: %w", err)
	}
	fmt.Fprintln(w, "GROUP\tTYPE\tSTATE\tPROTOCOL TYPE")
	for _, g := range listed.Sorted() {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", g.Group, dash(g.GroupType), dash(g.State), dash(g.ProtocolType))
	}
	return nil
}

// describeGroup describes a KIP-848 group with ConsumerGroupDescribe,
// and, if the cluster knows no such consumer group, a classic one with
// DescribeGroups.
func describeGroup(ctx context.Context, adm *kadm.Client, w io.Writer, group string) error {
	described, err := adm.DescribeConsumerGroups(ctx, group)
	if err == nil {
		g, ok := described[group]
		switch {
		case !ok:
			return fmt.Errorf("describe %s: the coordinator did not answer for the group", group)
		case g.Err == nil:
			writeConsumerGroup(w, g)
			return nil
		case !errors.Is(g.Err, kerr.GroupIDNotFound):
			return fmt.Errorf("describe %s: %w", group, g.Err)
		}
	}
	// Not a consumer group (or a cluster without KIP-848): try classic.
	classic, cerr := adm.DescribeGroups(ctx, group)
	if cerr != nil {
		if err != nil {
			return fmt.Errorf("describe %s: %w", group, err)
		}
		return fmt.Errorf("describe %s: %w", group, cerr)
	}
	g, ok := classic[group]
	switch {
	case !ok:
		return fmt.Errorf("describe %s: the coordinator did not answer for the group", group)
	case errors.Is(g.Err, kerr.GroupIDNotFound) || g.Err == nil && g.State == "Dead":
		return fmt.Errorf("group %q not found", group)
	case g.Err != nil:
		return fmt.Errorf("describe %s: %w", group, g.Err)
	}
	writeClassicGroup(w, g)
	return nil
}

func writeConsumerGroup(w io.Writer, g kadm.DescribedConsumerGroup) {
	fmt.Fprintf(w, "GROUP\t%s\n", g.Group)
	fmt.Fprintf(w, "TYPE\tconsumer (KIP-848)\n")
	fmt.Fprintf(w, "STATE\t%s\n", g.State)
	fmt.Fprintf(w, "EPOCH\t%d (assignment epoch %d)\n", g.Epoch, g.AssignmentEpoch)
	fmt.Fprintf(w, "ASSIGNOR\t%s\n", dash(g.AssignorName))
	fmt.Fprintf(w, "COORDINATOR\t%s\n", coordinatorOf(g.Coordinator))
	fmt.Fprintf(w, "MEMBERS\t%d\n", len(g.Members))
	if len(g.Members) == 0 {
		return
	}
	// The target column appears only while a reconciliation is under way.
	reconciling := false
	for _, m := range g.Members {
		if formatPartitions(m.Assignment) != formatPartitions(m.TargetAssignment) {
			reconciling = true
		}
	}
	members := slices.Clone(g.Members)
	slices.SortFunc(members, func(a, b kadm.ConsumerGroupMember) int {
		return cmp.Or(cmp.Compare(deref(a.InstanceID), deref(b.InstanceID)), cmp.Compare(a.MemberID, b.MemberID))
	})
	fmt.Fprintln(w)
	header := "MEMBER\tINSTANCE\tEPOCH\tCLIENT\tHOST\tOWNED\tPARTITIONS"
	if reconciling {
		header += "\tTARGET"
	}
	fmt.Fprintln(w, header)
	for _, m := range members {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%d\t%s", m.MemberID, dash(deref(m.InstanceID)), m.MemberEpoch,
			dash(m.ClientID), dash(m.ClientHost), countPartitions(m.Assignment), formatPartitions(m.Assignment))
		if reconciling {
			fmt.Fprintf(w, "\t%s", formatPartitions(m.TargetAssignment))
		}
		fmt.Fprintln(w)
	}
}

func writeClassicGroup(w io.Writer, g kadm.DescribedGroup) {
	fmt.Fprintf(w, "GROUP\t%s\n", g.Group)
	fmt.Fprintf(w, "TYPE\tclassic\n")
	fmt.Fprintf(w, "STATE\t%s\n", g.State)
	fmt.Fprintf(w, "PROTOCOL\t%s/%s\n", dash(g.ProtocolType), dash(g.Protocol))
	fmt.Fprintf(w, "COORDINATOR\t%s\n", coordinatorOf(g.Coordinator))
	fmt.Fprintf(w, "MEMBERS\t%d\n", len(g.Members))
	if len(g.Members) == 0 {
		return
	}
	members := slices.Clone(g.Members)
	slices.SortFunc(members, func(a, b kadm.DescribedGroupMember) int {
		return cmp.Or(cmp.Compare(deref(a.InstanceID), deref(b.InstanceID)), cmp.Compare(a.MemberID, b.MemberID))
	})
	fmt.Fprintln(w)
	fmt.Fprintln(w, "MEMBER\tINSTANCE\tCLIENT\tHOST\tOWNED\tPARTITIONS")
	for _, m := range members {
		assigned := make(kadm.TopicsSet)
		if a, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range a.Topics {
				assigned.Add(t.Topic, t.Partitions...)
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\n", m.MemberID, dash(deref(m.InstanceID)),
			dash(m.ClientID), dash(m.ClientHost), countPartitions(assigned), formatPartitions(assigned))
	}
}

func groupOffsets(ctx context.Context, adm *kadm.Client, w io.Writer, group string) error {
	offsets, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		if errors.Is(err, kerr.GroupIDNotFound) {
			return fmt.Errorf("group %q not found", group)
		}
		return fmt.Errorf("offsets of %s: %w", group, err)
	}
	fmt.Fprintln(w, "TOPIC\tPARTITION\tOFFSET\tMETADATA\tERROR")
	for _, o := range offsets.Sorted() {
		e := "-"
		if o.Err != nil {
			e = o.Err.Error()
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%s\n", o.Topic, o.Partition, o.At, dash(o.Metadata), e)
	}
	return nil
}

func deleteGroup(ctx context.Context, adm *kadm.Client, w io.Writer, group string) error {
	resp, err := adm.DeleteGroup(ctx, group)
	if err == nil {
		err = resp.Err
	}
	switch {
	case errors.Is(err, kerr.GroupIDNotFound):
		return fmt.Errorf("group %q not found", group)
	case errors.Is(err, kerr.NonEmptyGroup):
		return fmt.Errorf("group %q still has members: a group is deleted once they have left", group)
	case err != nil:
		return fmt.Errorf("delete %s: %w", group, err)
	}
	fmt.Fprintf(w, "deleted group %s\n", group)
	return nil
}

// formatPartitions renders a set of partitions compactly and sorted, as
// "topic:0-3,8 other:1".
func formatPartitions(s kadm.TopicsSet) string {
	var parts []string
	for _, topic := range slices.Sorted(maps.Keys(s)) {
		ps := slices.Sorted(maps.Keys(s[topic]))
		if len(ps) == 0 {
			continue
		}
		parts = append(parts, topic+":"+formatRanges(ps))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

// formatRanges renders sorted numbers as ranges: 0-3,8,10-11.
func formatRanges(ps []int32) string {
	var b strings.Builder
	for i := 0; i < len(ps); {
		j := i
		for j+1 < len(ps) && ps[j+1] == ps[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(int(ps[i])))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(int(ps[j])))
		}
		i = j + 1
	}
	return b.String()
}

func countPartitions(s kadm.TopicsSet) int {
	n := 0
	for _, ps := range s {
		n += len(ps)
	}
	return n
}

func coordinatorOf(b kadm.BrokerDetail) string {
	return fmt.Sprintf("%d (%s:%d)", b.NodeID, b.Host, b.Port)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
