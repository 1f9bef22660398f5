package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/tenure-dev/tenure/internal/workload"
)

// printRecords is `tenure worker --records`: the read-back of what the
// workers of o.group wrote to the resources o.resource names, one table per
// resource, by token. It joins nothing, so it can run beside the workers.
func printRecords(ctx context.Context, o *workerOptions, out io.Writer, log *zap.Logger) error {
	// Where the records are read from is the worker's news, not the
	// reader's: the table is the answer.
	log = log.WithOptions(zap.IncreaseLevel(zapcore.WarnLevel))
	kinds := splitList(o.resource)
	for i, kind := range kinds {
		res, closeRes, err := openResource(ctx, o, kind, nil, log)
		if err != nil {
			return err
		}
		stored, err := res.Records(ctx)
		closeRes()
		if err != nil {
			return fmt.Errorf("%s: %w", kind, err)
		}
		if len(kinds) > 1 {
			if i > 0 {
				fmt.Fprintln(out)
			}
			fmt.Fprintf(out, "RESOURCE  %s\n", kind)
		}
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TOKEN\tRECORDS\tWRITTEN AGAIN\tAFTER A NEWER TOKEN")
		for _, s := range workload.Summarize(stored) {
			fmt.Fprintf(tw, "%d\t%d\t%d\t%d\n", s.Token, s.Records, s.Again, s.AfterNewer)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}
