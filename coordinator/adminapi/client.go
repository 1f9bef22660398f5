package adminapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Client calls the admin API of one tenure node.
type Client struct {
	// Base is the node's --http address: http://host:port (a bare
	// host:port gets http://).
	Base string
	// HTTP is the client to use; nil means http.DefaultClient.
	HTTP *http.Client
}

// Error is an error the API answered with.
type Error struct {
	Status int
	Code   string // bad_request, unknown_group, ...
	Msg    string
	// Leader is the Kafka address of the coordinating node, for
	// not_coordinator; the message names it too.
	Leader string
}

func (e *Error) Error() string { return e.Msg }

// Log returns the newest limit entries of the group's log, below epoch
// before if before > 0.
func (c *Client) Log(ctx context.Context, group string, before int32, limit int) ([]LogEntry, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if before > 0 {
		q.Set("before", strconv.Itoa(int(before)))
	}
	return getJSON[[]LogEntry](ctx, c, "/api/groups/"+url.PathEscape(group)+"/log?"+q.Encode())
}

// getJSON GETs path and decodes its answer into a T.
func getJSON[T any](ctx context.Context, c *Client, path string) (T, error) {
	var out T
	err := c.do(ctx, http.MethodGet, path, &out)
	return out, err
}

// Drain drains member (see coordinator.Drain).
func (c *Client) Drain(ctx context.Context, group, member string, remove bool) error {
	p := "/api/groups/" + url.PathEscape(group) + "/members/" + url.PathEscape(member) + "/drain"
	if remove {
		p += "?remove=true"
	}
	return c.do(ctx, http.MethodPost, p, nil)
}

// Undrain lets a drained member be assigned partitions again.
func (c *Client) Undrain(ctx context.Context, group, member string) error {
	p := "/api/groups/" + url.PathEscape(group) + "/members/" + url.PathEscape(member) + "/undrain"
	return c.do(ctx, http.MethodPost, p, nil)
}

func (c *Client) do(ctx context.Context, method, path string, out any) error {
	base := strings.TrimSuffix(c.Base, "/")
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, nil)
	if err != nil {
		return err
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("tenure admin API at %s: %w (is the node serving --http there?)", base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e apiError
		if json.Unmarshal(body, &e) != nil || e.Error == "" {
			return &Error{Status: resp.StatusCode, Code: "http", Msg: fmt.Sprintf("%s %s: %s", method, path, resp.Status)}
		}
		return &Error{Status: resp.StatusCode, Code: e.Code, Msg: e.Error, Leader: e.Leader}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("tenure admin API at %s: %s: %w", base, path, err)
	}
	return nil
}
