package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tenure-dev/tenure/coordinator/adminapi"
)

func groupsDescribe() groupsSubcommand {
	return groupsSubcommand{
		name: "describe",
		args: []string{"GROUP"},
		help: "state, epoch, assignor, and each member with its epoch\n" +
			"and assigned partitions (KIP-848 groups through\n" +
			"ConsumerGroupDescribe, classic groups through\n" +
			"DescribeGroups)",
		// --admin: whether the coordinator keeps its state in memory.
		reads: groupsKafkaFlags("admin"),
		setup: func(*flag.FlagSet) groupsRun {
			return func(ctx context.Context, cl groupsClient, args []string) (result, error) {
				ctx, cancel := cl.bound(ctx)
				defer cancel()
				c, g, err := describeAnyGroup(ctx, cl.adm, args[0])
				if err != nil {
					return nil, err
				}
				var d *groupDescription
				if c != nil {
					d = consumerDescription(c)
				} else {
					d = classicDescription(g)
				}
				d.Store = storeOf(ctx, cl.api, d.Coordinator)
				return d, nil
			}
		},
	}
}

// describeAnyGroup describes a KIP-848 group with ConsumerGroupDescribe,
// and, if the cluster knows no such consumer group, a classic one with
// DescribeGroups. Exactly one of the two results is set when err is nil.
func describeAnyGroup(ctx context.Context, adm *kadm.Client, group string) (*kadm.DescribedConsumerGroup, *kadm.DescribedGroup, error) {
	described, err := adm.DescribeConsumerGroups(ctx, group)
	if err == nil {
		g, ok := described[group]
		switch {
		case !ok:
			return nil, nil, fmt.Errorf("describe %s: the coordinator did not answer for the group", group)
		case g.Err == nil:
			return &g, nil, nil
		case !errors.Is(g.Err, kerr.GroupIDNotFound):
			return nil, nil, fmt.Errorf("describe %s: %w", group, g.Err)
		}
	}
	// Not a consumer group (or a cluster without KIP-848): try classic.
	classic, cerr := adm.DescribeGroups(ctx, group)
	if cerr != nil {
		if err != nil {
			return nil, nil, fmt.Errorf("describe %s: %w", group, err)
		}
		return nil, nil, fmt.Errorf("describe %s: %w", group, cerr)
	}
	g, ok := classic[group]
	switch {
	case !ok:
		return nil, nil, fmt.Errorf("describe %s: the coordinator did not answer for the group", group)
	case errors.Is(g.Err, kerr.GroupIDNotFound) || g.Err == nil && g.State == "Dead":
		return nil, nil, fmt.Errorf("group %q not found", group)
	case g.Err != nil:
		return nil, nil, fmt.Errorf("describe %s: %w", group, g.Err)
	}
	return nil, &g, nil
}

// groupDescription is the result of `groups describe`, for both group
// types; a field the type does not have is null.
type groupDescription struct {
	Group string `json:"group"`
	// Type is "consumer" (KIP-848) or "classic".
	Type  string `json:"type"`
	State string `json:"state"`
	// Epoch, AssignmentEpoch and Assignor are a KIP-848 group's.
	Epoch           *int32  `json:"epoch"`
	AssignmentEpoch *int32  `json:"assignment_epoch"`
	Assignor        *string `json:"assignor"`
	// ProtocolType and Protocol (the assignor the leader chose) are a
	// classic group's.
	ProtocolType *string   `json:"protocol_type"`
	Protocol     *string   `json:"protocol"`
	Coordinator  brokerRef `json:"coordinator"`
	// Store is "memory" when the coordinator's admin API (--admin) says
	// it keeps its state in memory, whose tokens restart from 1; null
	// when it keeps it in etcd or cannot be asked.
	Store       *string           `json:"store"`
	Members     []describedMember `json:"members"`
	reconciling bool              // some member's assignment is not its target
}

type brokerRef struct {
	NodeID int32  `json:"node_id"`
	Host   string `json:"host"`
	Port   int32  `json:"port"`
}

type describedMember struct {
	MemberID   string  `json:"member_id"`
	InstanceID *string `json:"instance_id"`
	// MemberEpoch is a KIP-848 member's epoch: the token of the
	// partitions it is given next.
	MemberEpoch          *int32            `json:"member_epoch"`
	ClientID             string            `json:"client_id"`
	ClientHost           string            `json:"client_host"`
	SubscribedTopics     []string          `json:"subscribed_topics"`
	SubscribedTopicRegex *string           `json:"subscribed_topic_regex"`
	Assignment           []topicPartitions `json:"assignment"`
	// TargetAssignment is what a KIP-848 member reconciles towards.
	TargetAssignment []topicPartitions `json:"target_assignment"`
}

func consumerDescription(g *kadm.DescribedConsumerGroup) *groupDescription {
	d := &groupDescription{
		Group: g.Group, Type: "consumer", State: g.State,
		Epoch: &g.Epoch, AssignmentEpoch: &g.AssignmentEpoch, Assignor: &g.AssignorName,
		Coordinator: brokerRef{g.Coordinator.NodeID, g.Coordinator.Host, g.Coordinator.Port},
		Members:     []describedMember{},
	}
	for _, m := range g.Members {
		dm := describedMember{
			MemberID: m.MemberID, InstanceID: m.InstanceID, MemberEpoch: &m.MemberEpoch,
			ClientID: m.ClientID, ClientHost: m.ClientHost,
			SubscribedTopics: slices.Sorted(slices.Values(m.SubscribedTopics)), SubscribedTopicRegex: m.SubscribedTopicRegex,
			Assignment: topicsOf(m.Assignment), TargetAssignment: topicsOf(m.TargetAssignment),
		}
		if dm.SubscribedTopics == nil {
			dm.SubscribedTopics = []string{}
		}
		if formatPartitions(dm.Assignment) != formatPartitions(dm.TargetAssignment) {
			d.reconciling = true
		}
		d.Members = append(d.Members, dm)
	}
	sortMembers(d.Members)
	return d
}

func classicDescription(g *kadm.DescribedGroup) *groupDescription {
	d := &groupDescription{
		Group: g.Group, Type: "classic", State: g.State,
		ProtocolType: &g.ProtocolType, Protocol: &g.Protocol,
		Coordinator: brokerRef{g.Coordinator.NodeID, g.Coordinator.Host, g.Coordinator.Port},
		Members:     []describedMember{},
	}
	for _, m := range g.Members {
		dm := describedMember{
			MemberID: m.MemberID, InstanceID: m.InstanceID, ClientID: m.ClientID, ClientHost: m.ClientHost,
			SubscribedTopics: []string{},
		}
		if meta, ok := m.Join.AsConsumer(); ok {
			dm.SubscribedTopics = slices.Sorted(slices.Values(meta.Topics))
		}
		assigned := make(kadm.TopicsSet)
		if a, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range a.Topics {
				assigned.Add(t.Topic, t.Partitions...)
			}
		}
		dm.Assignment = topicsOf(assigned)
		d.Members = append(d.Members, dm)
	}
	sortMembers(d.Members)
	return d
}

// sortMembers sorts by instance ID, then member ID.
func sortMembers(ms []describedMember) {
	slices.SortFunc(ms, func(a, b describedMember) int {
		return cmp.Or(cmp.Compare(deref(a.InstanceID), deref(b.InstanceID)), cmp.Compare(a.MemberID, b.MemberID))
	})
}

func (d *groupDescription) writeTable(w io.Writer) {
	fmt.Fprintf(w, "GROUP\t%s\n", d.Group)
	if d.Type == "classic" {
		fmt.Fprintf(w, "TYPE\tclassic\n")
		fmt.Fprintf(w, "STATE\t%s\n", d.State)
		fmt.Fprintf(w, "PROTOCOL\t%s/%s\n", dash(deref(d.ProtocolType)), dash(deref(d.Protocol)))
	} else {
		fmt.Fprintf(w, "TYPE\tconsumer (KIP-848)\n")
		fmt.Fprintf(w, "STATE\t%s\n", d.State)
		fmt.Fprintf(w, "EPOCH\t%d (assignment epoch %d)\n", deref(d.Epoch), deref(d.AssignmentEpoch))
		fmt.Fprintf(w, "ASSIGNOR\t%s\n", dash(deref(d.Assignor)))
	}
	fmt.Fprintf(w, "COORDINATOR\t%d (%s:%d)\n", d.Coordinator.NodeID, d.Coordinator.Host, d.Coordinator.Port)
	fmt.Fprintf(w, "MEMBERS\t%d\n", len(d.Members))
	if d.Store != nil && *d.Store == "memory" {
		defer func() {
			fmt.Fprintln(w)
			fmt.Fprintln(w, memoryStoreNote)
		}()
	}
	if len(d.Members) == 0 {
		return
	}
	fmt.Fprintln(w)
	if d.Type == "classic" {
		fmt.Fprintln(w, "MEMBER\tINSTANCE\tCLIENT\tHOST\tOWNED\tPARTITIONS")
		for _, m := range d.Members {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\n", m.MemberID, dash(deref(m.InstanceID)),
				dash(m.ClientID), dash(m.ClientHost), countPartitions(m.Assignment), formatPartitions(m.Assignment))
		}
		return
	}
	// The target column appears only while a reconciliation is under way.
	header := "MEMBER\tINSTANCE\tEPOCH\tCLIENT\tHOST\tOWNED\tPARTITIONS"
	if d.reconciling {
		header += "\tTARGET"
	}
	fmt.Fprintln(w, header)
	for _, m := range d.Members {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%d\t%s", m.MemberID, dash(deref(m.InstanceID)), deref(m.MemberEpoch),
			dash(m.ClientID), dash(m.ClientHost), countPartitions(m.Assignment), formatPartitions(m.Assignment))
		if d.reconciling {
			fmt.Fprintf(w, "\t%s", formatPartitions(m.TargetAssignment))
		}
		fmt.Fprintln(w)
	}
	if slices.ContainsFunc(d.Members, func(m describedMember) bool { return deref(m.MemberEpoch) == staticLeftEpoch }) {
		fmt.Fprintln(w)
		fmt.Fprintln(w, staticLeftNote)
	}
}

// memoryStoreNote says under the group what a memory store means for it.
const memoryStoreNote = "STORE memory (tenure serve --store memory): after the coordinator restarts, tokens start again from 1, " +
	"below those its members held before; fences refuse the new owners' writes until the group's epoch passes its old one, " +
	"while this shows them owning their partitions."

// storeOf asks the admin API whether the coordinator of the group keeps
// its state in memory: "memory" if the node the API belongs to is the
// group's coordinator and says so, else nil (etcd, or the API cannot be
// reached or belongs to another node: describe says nothing rather than
// guess).
func storeOf(ctx context.Context, api *adminapi.Client, coord brokerRef) *string {
	if api == nil || api.Base == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	info, err := api.Store(ctx)
	if err != nil || info.Kind != "memory" {
		return nil
	}
	if !slices.Contains(info.Listeners, net.JoinHostPort(coord.Host, strconv.Itoa(int(coord.Port)))) {
		return nil
	}
	kind := info.Kind
	return &kind
}

// staticLeftEpoch is the epoch of a static member that left (Kafka's
// LEAVE_GROUP_STATIC_MEMBER_EPOCH).
const staticLeftEpoch = -2

// staticLeftNote explains it under the members.
const staticLeftNote = "EPOCH -2: a static member that left (a restart): its partitions stay its, owned by no one else, " +
	"until it rejoins with its instance ID and takes them back, or its session times out and they are reassigned."
