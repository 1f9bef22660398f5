package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tenure-dev/tenure/coordinator/adminapi"
)

// groupsCommand is `tenure groups`: group administration over the Kafka
// protocol, against tenure or any Kafka cluster.
func groupsCommand() *command {
	return &command{
		name:    "groups",
		summary: "administer groups: list, describe, offsets, delete, explain, drain, what-if",
		help:    groupsHelp,
		subs:    groupsSubs(groupsSubcommands()),
		setup:   setupGroups,
	}
}

// groupsSubcommand is one subcommand of `tenure groups`.
//
// To add one: write a function that returns it, in a file of its own
// (groups_NAME.go), and list it in groupsSubcommands. Its run function
// returns a result (output.go), which prints as a table or, with -o json,
// as JSON; document the JSON shape in docs/OPERATIONS.md.
type groupsSubcommand struct {
	name string
	// args names the positional arguments ("GROUP"); the subcommand
	// takes exactly that many, but for those in brackets ("[MEMBER]"),
	// which may be left out.
	args []string
	// help is the subcommand's entry in `tenure groups --help`, one or
	// more lines of at most 56 characters.
	help string
	// reads names the flags of newGroupsCLI (shared by several
	// subcommands) that the subcommand reads: groupsKafkaFlags for one
	// that asks the cluster over the Kafka protocol, "admin" for one
	// that asks the admin API. Its --help lists these and its own, and
	// any other flag is refused with it.
	reads []string
	// setup registers the subcommand's own flags, if any, on fs (the
	// flag set of `tenure groups`, shared by every subcommand) and
	// returns the function that runs it. Those flags are refused with
	// any other subcommand. A name two subcommands register makes the
	// flag set panic: a flag that several share belongs with --brokers
	// and --output, in newGroupsCLI, and in their reads.
	setup func(fs *flag.FlagSet) groupsRun
}

// groupsKafkaFlags are the flags a subcommand that asks the cluster over
// the Kafka protocol reads (--brokers, --timeout, TLS, SASL, and
// --output), and more.
func groupsKafkaFlags(more ...string) []string {
	return slices.Concat(adminFlagNames(), []string{"output"}, more)
}

// groupsRun runs a subcommand on its positional arguments. ctx ends only
// if the command is interrupted: bound each exchange with the cluster by
// --timeout with cl.bound. A usage error (usagef) should come before any
// request; cl dials nothing until the first.
type groupsRun func(ctx context.Context, cl groupsClient, args []string) (result, error)

// groupsClient is the cluster a subcommand works on.
type groupsClient struct {
	adm     *kadm.Client
	timeout time.Duration
	// clientOpts make a client of --brokers with the TLS and SASL
	// flags, for a request kadm does not make.
	clientOpts []kgo.Opt
	// api is the admin API of the node at --admin (explain, drain).
	api *adminapi.Client
	// remove is --remove, which what-if and drain share.
	remove []string
}

// bound returns ctx bounded by --timeout, for an exchange with the
// cluster.
func (c groupsClient) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout)
}

// groupsSubcommands lists the subcommands in the order the help shows them.
func groupsSubcommands() []groupsSubcommand {
	return []groupsSubcommand{
		groupsList(),
		groupsDescribe(),
		groupsOffsets(),
		groupsDelete(),
		groupsExplain(),
		groupsDrain(),
		groupsWhatIf(),
	}
}

// groupsSubs are the subcommands as `tenure groups` parses and shows
// them: each with the shared flags it reads and those its setup
// registers, found by registering every flag on a flag set of their own.
func groupsSubs(subs []groupsSubcommand) []subcommand {
	c := newGroupsCLI(flag.NewFlagSet("tenure groups", flag.ContinueOnError), subs, io.Discard)
	out := make([]subcommand, len(subs))
	for i, s := range subs {
		out[i] = subcommand{name: s.name, args: s.args, help: s.help, flags: slices.Concat(s.reads, c.own[s.name])}
	}
	return out
}

const groupsHelp = `Flags may come before or after the subcommand; each subcommand takes only
the flags it reads, which its --help lists. Tables are sorted; -o json
prints one JSON document instead, of the shape docs/OPERATIONS.md gives for
each subcommand. Requests go to the group's coordinator, found through any
node given in --brokers (any node of an HA set); explain and drain use the
admin API on a node's --http listener (--admin), any node of an HA set too:
one that does not lead forwards a drain to the leader's --http listener.
explain asks the admin API alone, and takes no --brokers, TLS or SASL flag.`

func setupGroups(fs *flag.FlagSet) func(ctx context.Context, args []string) error {
	return newGroupsCLI(fs, groupsSubcommands(), os.Stdout).run
}

// groupsCLI is `tenure groups` once its flags are registered: the shared
// flags, and each subcommand's run function and flags.
type groupsCLI struct {
	admin    adminFlags
	output   *outputFormat
	adminURL *string
	remove   listFlag
	subs     []groupsSubcommand
	runs     []groupsRun
	// own lists the flags each subcommand's setup registered, by
	// subcommand.
	own map[string][]string
	out io.Writer
}

func newGroupsCLI(fs *flag.FlagSet, subs []groupsSubcommand, out io.Writer) *groupsCLI {
	c := &groupsCLI{admin: addAdminFlags(fs), output: addOutputFlag(fs), subs: subs, own: map[string][]string{}, out: out}
	c.adminURL = fs.String("admin", "http://"+defaultHTTP, "describe, explain, drain: `URL` of a node's --http listener (its admin API)")
	fs.Var(&c.remove, "remove", "what-if: a `member` (member or instance ID) leaves, or crashes; repeatable, or a comma-separated list. drain: drain this member, then remove it once it holds nothing")
	for _, s := range subs {
		known := map[string]bool{}
		fs.VisitAll(func(f *flag.Flag) { known[f.Name] = true })
		c.runs = append(c.runs, s.setup(fs))
		fs.VisitAll(func(f *flag.Flag) {
			if !known[f.Name] {
				c.own[s.name] = append(c.own[s.name], f.Name)
			}
		})
	}
	return c
}

// run runs the subcommand args name on the rest of args, the positional
// arguments of the command line (parseCommandLine took its flags).
func (c *groupsCLI) run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("missing subcommand: %s", c.names())
	}
	name, args := args[0], args[1:]
	i := slices.IndexFunc(c.subs, func(s groupsSubcommand) bool { return s.name == name })
	if i < 0 {
		return usagef("unknown subcommand %q: %s", name, c.names())
	}
	sub := c.subs[i]
	required := 0
	for _, a := range sub.args {
		if !strings.HasPrefix(a, "[") {
			required++
		}
	}
	if len(args) < required || len(args) > len(sub.args) {
		switch len(sub.args) {
		case 0:
			return usagef("%s takes no argument, got %q", name, args)
		case 1:
			return usagef("%s takes one %s, got %q", name, sub.args[0], args)
		}
		return usagef("%s takes %s, got %q", name, strings.Join(sub.args, " "), args)
	}
	adm, done, err := c.admin.client()
	if err != nil {
		return err
	}
	defer done()
	clientOpts, err := c.admin.kgoOpts()
	if err != nil {
		return err
	}
	// The admin API's connections are the command's own, closed when it
	// returns: describe asks --admin (by default 127.0.0.1:9644, where any
	// node may listen), and a keep-alive connection left in
	// http.DefaultTransport would outlive the command.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	gc := groupsClient{adm: adm, timeout: *c.admin.timeout, clientOpts: clientOpts,
		api: &adminapi.Client{Base: *c.adminURL, HTTP: &http.Client{Transport: tr}}, remove: c.remove}
	if sub.name == "explain" || sub.name == "drain" {
		r, err := c.runs[i](ctx, gc, args)
		if err != nil {
			return err // the admin API's errors name --admin
		}
		return writeResult(c.out, *c.output, r)
	}
	var r result
	if err := c.admin.guard(ctx, func(ctx context.Context) (err error) {
		r, err = c.runs[i](ctx, gc, args)
		return err
	}); err != nil {
		return err
	}
	return writeResult(c.out, *c.output, r)
}

func (c *groupsCLI) names() string {
	var names []string
	for _, s := range c.subs {
		names = append(names, s.name)
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

func groupsList() groupsSubcommand {
	return groupsSubcommand{
		name:  "list",
		help:  "every group, with its type (classic or consumer), state\nand protocol type",
		reads: groupsKafkaFlags(),
		setup: func(*flag.FlagSet) groupsRun {
			return func(ctx context.Context, cl groupsClient, _ []string) (result, error) {
				ctx, cancel := cl.bound(ctx)
				defer cancel()
				return listGroups(ctx, cl.adm)
			}
		},
	}
}

// groupList is the result of `groups list`.
type groupList struct {
	Groups []listedGroup `json:"groups"`
}

type listedGroup struct {
	Group string `json:"group"`
	// Type is "consumer" (KIP-848) or "classic"; "" if the cluster does
	// not say.
	Type         string `json:"type"`
	State        string `json:"state"`
	ProtocolType string `json:"protocol_type"`
	Coordinator  int32  `json:"coordinator_id"`
}

func listGroups(ctx context.Context, adm *kadm.Client) (*groupList, error) {
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		return nil, fmt.Errorf("list groups: %w", err)
	}
	out := &groupList{Groups: []listedGroup{}}
	for _, g := range listed.Sorted() {
		out.Groups = append(out.Groups, listedGroup{g.Group, g.GroupType, g.State, g.ProtocolType, g.Coordinator})
	}
	return out, nil
}

func (l *groupList) writeTable(w io.Writer) {
	fmt.Fprintln(w, "GROUP\tTYPE\tSTATE\tPROTOCOL TYPE")
	for _, g := range l.Groups {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", g.Group, dash(g.Type), dash(g.State), dash(g.ProtocolType))
	}
}

func groupsOffsets() groupsSubcommand {
	return groupsSubcommand{
		name:  "offsets",
		args:  []string{"GROUP"},
		help:  "the committed offset of each partition",
		reads: groupsKafkaFlags(),
		setup: func(*flag.FlagSet) groupsRun {
			return func(ctx context.Context, cl groupsClient, args []string) (result, error) {
				ctx, cancel := cl.bound(ctx)
				defer cancel()
				return groupOffsets(ctx, cl.adm, args[0])
			}
		},
	}
}

// offsetList is the result of `groups offsets`.
type offsetList struct {
	Group   string            `json:"group"`
	Offsets []committedOffset `json:"offsets"`
}

type committedOffset struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	Offset      int64  `json:"offset"`
	LeaderEpoch int32  `json:"leader_epoch"`
	Metadata    string `json:"metadata"`
	// Error is the partition's error, or null.
	Error *string `json:"error"`
}

func groupOffsets(ctx context.Context, adm *kadm.Client, group string) (*offsetList, error) {
	offsets, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		if errors.Is(err, kerr.GroupIDNotFound) {
			return nil, fmt.Errorf("group %q not found", group)
		}
		return nil, fmt.Errorf("offsets of %s: %w", group, err)
	}
	out := &offsetList{Group: group, Offsets: []committedOffset{}}
	for _, o := range offsets.Sorted() {
		c := committedOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.At, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata}
		if o.Err != nil {
			e := o.Err.Error()
			c.Error = &e
		}
		out.Offsets = append(out.Offsets, c)
	}
	return out, nil
}

func (l *offsetList) writeTable(w io.Writer) {
	fmt.Fprintln(w, "TOPIC\tPARTITION\tOFFSET\tMETADATA\tERROR")
	for _, o := range l.Offsets {
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%s\n", o.Topic, o.Partition, o.Offset, dash(o.Metadata), dash(deref(o.Error)))
	}
}

func groupsDelete() groupsSubcommand {
	return groupsSubcommand{
		name:  "delete",
		args:  []string{"GROUP"},
		help:  "delete a group that has no members, with its offsets",
		reads: groupsKafkaFlags(),
		setup: func(*flag.FlagSet) groupsRun {
			return func(ctx context.Context, cl groupsClient, args []string) (result, error) {
				ctx, cancel := cl.bound(ctx)
				defer cancel()
				return deleteGroup(ctx, cl.adm, args[0])
			}
		},
	}
}

// groupDeleted is the result of `groups delete`: a group that could not be
// deleted is an error instead.
type groupDeleted struct {
	Group   string `json:"group"`
	Deleted bool   `json:"deleted"`
}

func deleteGroup(ctx context.Context, adm *kadm.Client, group string) (*groupDeleted, error) {
	resp, err := adm.DeleteGroup(ctx, group)
	if err == nil {
		err = resp.Err
	}
	switch {
	case errors.Is(err, kerr.GroupIDNotFound):
		return nil, fmt.Errorf("group %q not found", group)
	case errors.Is(err, kerr.NonEmptyGroup):
		return nil, fmt.Errorf("group %q still has members: a group is deleted once they have left", group)
	case err != nil:
		return nil, fmt.Errorf("delete %s: %w", group, err)
	}
	return &groupDeleted{Group: group, Deleted: true}, nil
}

func (d *groupDeleted) writeTable(w io.Writer) {
	fmt.Fprintf(w, "deleted group %s\n", d.Group)
}

// topicPartitions is a topic's partitions, sorted, in JSON output.
type topicPartitions struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

// topicsOf lists a set's partitions by topic, both sorted, leaving out
// topics without partitions; never nil.
func topicsOf(s kadm.TopicsSet) []topicPartitions {
	out := []topicPartitions{}
	for _, topic := range s.Sorted() {
		if len(topic.Partitions) > 0 {
			out = append(out, topicPartitions{topic.Topic, topic.Partitions})
		}
	}
	return out
}

// formatPartitions renders partitions compactly, as "topic:0-3,8 other:1";
// "-" for none.
func formatPartitions(ts []topicPartitions) string {
	var parts []string
	for _, t := range ts {
		if len(t.Partitions) > 0 {
			parts = append(parts, t.Topic+":"+formatRanges(t.Partitions))
		}
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

func countPartitions(ts []topicPartitions) int {
	n := 0
	for _, t := range ts {
		n += len(t.Partitions)
	}
	return n
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
