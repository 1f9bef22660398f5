package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/tenure-dev/tenure/coordinator/adminapi"
	"github.com/tenure-dev/tenure/epoch"
)

// keysCommand is `tenure keys`: the coordinator's grant-signing keys,
// through a node's admin API.
func keysCommand() *command {
	return &command{
		name:    "keys",
		summary: "list, rotate and revoke the keys grants are signed with (admin API)",
		subs: []subcommand{
			{name: "list", help: "every key: its ID, state, times and public key\n(Ed25519)", flags: keysFlags()},
			{name: "rotate", flags: keysFlags("now"), help: "a new key is published (pending: it verifies) and,\nafter the nodes' --key-publish-delay, signs every\ngrant; the active one then retires: it still\nverifies, and every member is granted its\npartitions again under the new key within a\nheartbeat. --now: the pending key, or a new one,\nsigns at once (after a compromise)"},
			{name: "revoke", args: []string{"ID"}, help: "a retired key verifies nothing from now on; a\npending one is cancelled (the active key cannot be\nrevoked: rotate first)", flags: keysFlags()},
		},
		help: `A coordinator signs grants with tenure serve --sign-grants. The keys live in
its store, shared by every node of an HA set, so any node's --http listener
answers (--admin). A retired key is revoked by the nodes --key-retention
(default 24h) after its rotation; revoke it sooner after a compromise.

Fences verify tokens with the public keys: --output json prints them in the
form the admin API's GET /api/keys serves and epoch.ParseKeySet reads, for a
resource to load at start and again now and then. A rotation publishes the
next key --key-publish-delay (default 1m) before it signs, so that a
resource that fetches the keys more often than that refuses no honest
write; rotate --now skips the delay.`,
		setup: setupKeys,
	}
}

// keysFlags are the flags every keys subcommand reads, and more.
func keysFlags(more ...string) []string {
	return append([]string{"admin", "timeout", "output"}, more...)
}

func setupKeys(fs *flag.FlagSet) func(ctx context.Context, args []string) error {
	return setupKeysOut(fs, os.Stdout)
}

// setupKeysOut is setupKeys writing to out.
func setupKeysOut(fs *flag.FlagSet, out io.Writer) func(ctx context.Context, args []string) error {
	adminURL := fs.String("admin", "http://"+defaultHTTP, "`URL` of a node's --http listener (its admin API)")
	timeout := fs.Duration("timeout", 10*time.Second, "how long to wait for the node's answer")
	output := addOutputFlag(fs)
	now := fs.Bool("now", false, "rotate: make the pending key, or a new one, sign at once, without the publish delay (after a compromise)")
	return func(ctx context.Context, args []string) error {
		if len(args) == 0 {
			return usagef("missing subcommand: list, rotate or revoke")
		}
		sub, args := args[0], args[1:]
		var id epoch.KeyID
		var err error
		switch sub {
		case "list", "rotate":
			if len(args) != 0 {
				return usagef("%s takes no argument, got %q", sub, args)
			}
		case "revoke":
			if len(args) != 1 {
				return usagef("revoke takes one key ID, got %q", args)
			}
			if id, err = epoch.ParseKeyID(args[0]); err != nil {
				return usagef("revoke: %v", err)
			}
		default:
			return usagef("unknown subcommand %q: list, rotate or revoke", sub)
		}
		if *timeout <= 0 {
			return usagef("--timeout must be positive")
		}
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		api := &adminapi.Client{Base: *adminURL}
		var ks *epoch.KeySet
		switch sub {
		case "list":
			ks, err = api.Keys(ctx)
		case "rotate":
			if *now {
				ks, err = api.RotateKeyNow(ctx)
			} else {
				ks, err = api.RotateKey(ctx)
			}
		case "revoke":
			ks, err = api.RevokeKey(ctx, id)
		}
		if e := (*adminapi.Error)(nil); errors.As(err, &e) && e.Code == "rotation_pending" {
			return fmt.Errorf("%s: %w (tenure keys rotate --now makes it sign at once)", sub, err)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", sub, err)
		}
		return writeResult(out, *output, keysResult{ks})
	}
}

// keysResult prints a key set: as the admin API publishes it (JSON), or
// one key a line.
type keysResult struct{ *epoch.KeySet }

func (r keysResult) MarshalJSON() ([]byte, error) { return json.Marshal(r.KeySet) }

func (r keysResult) writeTable(w io.Writer) {
	fmt.Fprintln(w, "KEY\tSTATE\tCREATED\tRETIRED\tREVOKED\tPUBLIC KEY (Ed25519, base64)\t")
	at := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format(time.RFC3339)
	}
	for _, k := range r.Keys() {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t\n", k.ID, k.State, at(k.Created), at(k.Retired), at(k.Revoked),
			base64.StdEncoding.EncodeToString(k.Key))
	}
}
