package main

import (
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// topicsCommand is `tenure topics`: the coordinator's topics over the
// Kafka protocol (Metadata, CreateTopics, DeleteTopics), as kadm does it.
func topicsCommand() *command {
	return &command{
		name:    "topics",
		summary: "list, create and delete topics (Kafka protocol, as kadm)",
		subs: []subcommand{
			{name: "list", help: "every topic, with its ID and partition count"},
			{name: "create", args: []string{"NAME[:PARTITIONS]..."}, help: "create topics; partitions default to the\ncoordinator's (tenure serve --partitions)"},
			{name: "delete", args: []string{"NAME..."}, help: "delete topics, at once and without asking:\nevery group's committed offsets of them are\ndeleted too, and KIP-848 members give up their\npartitions; prints each topic's result and\nexits non-zero if any deletion failed"},
		},
		help: `A topic's partition count never changes once it exists: each partition's
tokens belong to it. A topic deleted and created again is a new topic (a
new ID, no offsets). tenure serve --topic NAME:PARTITIONS declares topics
that exist from start-up (a declared topic that was deleted is created
again at the next start). Flags may come before or after the subcommand.`,
		setup: setupTopics,
	}
}

func setupTopics(fs *flag.FlagSet) func(ctx context.Context, args []string) error {
	admin := addAdminFlags(fs)
	return func(ctx context.Context, args []string) error {
		if len(args) == 0 {
			return usagef("missing subcommand: list, create or delete")
		}
		sub, args := args[0], args[1:]
		var specs []topicArg
		switch sub {
		case "list":
			if len(args) != 0 {
				return usagef("list takes no argument, got %q", args)
			}
		case "create":
			if len(args) == 0 {
				return usagef("create takes one or more NAME[:PARTITIONS]")
			}
			for _, a := range args {
				t, err := parseTopicArg(a)
				if err != nil {
					return err
				}
				specs = append(specs, t)
			}
		case "delete":
			if len(args) == 0 {
				return usagef("delete takes one or more NAME")
			}
			for _, a := range args {
				if a == "" {
					return usagef("delete: empty topic name")
				}
			}
		default:
			return usagef("unknown subcommand %q: list, create or delete", sub)
		}
		adm, ctx, done, err := admin.connect(ctx)
		if err != nil {
			return err
		}
		defer done()
		return admin.guard(ctx, func(ctx context.Context) error {
			switch sub {
			case "list":
				return listTopics(ctx, adm, os.Stdout)
			case "delete":
				return deleteTopics(ctx, adm, os.Stdout, args)
			}
			return createTopics(ctx, adm, os.Stdout, specs)
		})
	}
}

// topicArg is NAME[:PARTITIONS]; Partitions -1 asks for the default.
type topicArg struct {
	name       string
	partitions int32
}

func parseTopicArg(s string) (topicArg, error) {
	name, n, hasN := strings.Cut(s, ":")
	if name == "" {
		return topicArg{}, usagef("%q: empty topic name", s)
	}
	t := topicArg{name: name, partitions: -1}
	if hasN {
		p, err := strconv.ParseInt(n, 10, 32)
		if err != nil || p <= 0 {
			return topicArg{}, usagef("%q: the partition count must be a positive integer", s)
		}
		t.partitions = int32(p)
	}
	return t, nil
}

func listTopics(ctx context.Context, adm *kadm.Client, w io.Writer) error {
	details, err := adm.ListTopics(ctx)
	if err != nil {
		return err
	}
	names := details.Names()
	slices.Sort(names)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITIONS\tID")
	for _, name := range names {
		d := details[name]
		if d.Err != nil {
			fmt.Fprintf(tw, "%s\t-\t%v\n", name, d.Err)
			continue
		}
		// As Kafka's tools print a topic ID: URL-safe base64, unpadded.
		fmt.Fprintf(tw, "%s\t%d\t%s\n", name, len(d.Partitions), base64.RawURLEncoding.EncodeToString(d.ID[:]))
	}
	return tw.Flush()
}

// createTopics creates each topic; one that exists is reported with its
// partition count and is not an error.
func createTopics(ctx context.Context, adm *kadm.Client, w io.Writer, specs []topicArg) error {
	var errs []error
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITIONS\tRESULT")
	for _, t := range specs {
		resp, err := adm.CreateTopic(ctx, t.partitions, -1, nil, t.name)
		switch {
		case errors.Is(err, kerr.TopicAlreadyExists):
			parts := "?"
			if d, derr := adm.ListTopics(ctx, t.name); derr == nil && d[t.name].Err == nil {
				parts = strconv.Itoa(len(d[t.name].Partitions))
			}
			fmt.Fprintf(tw, "%s\t%s\texists\n", t.name, parts)
		case err != nil:
			fmt.Fprintf(tw, "%s\t-\t%v\n", t.name, err)
			errs = append(errs, fmt.Errorf("topic %q: %w", t.name, err))
		default:
			fmt.Fprintf(tw, "%s\t%d\tcreated\n", t.name, resp.NumPartitions)
		}
	}
	return errors.Join(append(errs, tw.Flush())...)
}

// deleteTopics deletes the named topics in one request (a name given
// twice is asked for once) and prints each one's result, in the order
// given; it returns an error naming every topic that was not deleted.
func deleteTopics(ctx context.Context, adm *kadm.Client, w io.Writer, names []string) error {
	var uniq []string
	for _, n := range names {
		if !slices.Contains(uniq, n) {
			uniq = append(uniq, n)
		}
	}
	resps, err := adm.DeleteTopics(ctx, uniq...)
	if err != nil {
		return err
	}
	var errs []error
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tRESULT")
	for _, name := range uniq {
		r, ok := resps[name]
		switch {
		case !ok:
			err = errors.New("not in the response")
		case r.Err != nil && r.ErrMessage != "":
			err = fmt.Errorf("%w: %s", r.Err, r.ErrMessage)
		default:
			err = r.Err
		}
		if err != nil {
			fmt.Fprintf(tw, "%s\t%v\n", name, err)
			errs = append(errs, fmt.Errorf("topic %q: %w", name, err))
			continue
		}
		fmt.Fprintf(tw, "%s\tdeleted\n", name)
	}
	return errors.Join(append(errs, tw.Flush())...)
}
