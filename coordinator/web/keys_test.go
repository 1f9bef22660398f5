package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tenure-dev/tenure/coordinator/server"
	"github.com/tenure-dev/tenure/coordinator/web"
	"github.com/tenure-dev/tenure/epoch"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// startSigning runs a coordinator that signs grants and returns it once
// its first key exists, with that key.
func startSigning(t *testing.T) (*server.Server, epoch.PublicKey) {
	t.Helper()
	cfg := testenv.TenureConfig(t, testSession, testHeartbeat, 4)
	cfg.SignGrants = true
	srv, _ := testenv.StartTenureServer(t, cfg)
	deadline := time.Now().Add(5 * time.Second)
	for {
		ks, err := srv.SigningKeys(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if k, ok := ks.Active(); ok {
			return srv, k
		}
		if time.Now().After(deadline) {
			t.Fatal("no active key after 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestKeysAPI: GET /api/keys publishes the signing keys in the form
// epoch.ParseKeySet reads; a node that does not sign answers 404.
func TestKeysAPI(t *testing.T) {
	srv, active := startSigning(t)
	hs := startPage(t, web.New(web.ServerSource{Server: srv}, web.Logger(testLogger(t))))
	resp, err := http.Get(hs.URL + "/api/keys")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/keys: %s %s", resp.Status, body)
	}
	ks, err := epoch.ParseKeySet(body)
	if err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	if k, ok := ks.Active(); !ok || k.ID != active.ID || !k.Key.Equal(active.Key) {
		t.Fatalf("published %s, want the active key %s", body, active.ID)
	}

	plain, _ := startTenure(t, 4)
	off := startPage(t, web.New(web.ServerSource{Server: plain}, web.Logger(testLogger(t))))
	var e struct{ Error string }
	if resp := getJSON(t, off, "/api/keys", &e); resp.StatusCode != http.StatusNotFound || e.Error == "" {
		t.Fatalf("GET /api/keys of a node that does not sign: %s %+v", resp.Status, e)
	}
}

// TestBrowserKeys: the page lists the signing keys under the groups, and
// follows a rotation without a reload.
func TestBrowserKeys(t *testing.T) {
	ctx := newBrowser(t)
	srv, first := startSigning(t)
	hs := startPage(t, web.New(web.ServerSource{Server: srv}, web.Logger(testLogger(t))))
	if err := chromedp.Do(ctx, chromedp.Navigate(hs.URL+"/#/")); err != nil {
		t.Fatal(err)
	}
	const read = `JSON.stringify({hidden: document.getElementById("keys-view").hidden,
		rows: [...document.querySelectorAll("#keys-table tbody tr")].map((tr) => [...tr.cells].map((td) => td.textContent))})`
	type keysView struct {
		Hidden bool
		Rows   [][]string
	}
	wait := func(what string, ok func(keysView) bool) keysView {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			s, err := chromedp.Run(ctx, chromedp.Evaluate[string](read))
			if err != nil {
				t.Fatal(err)
			}
			var v keysView
			if err := json.Unmarshal([]byte(s), &v); err != nil {
				t.Fatal(err)
			}
			if ok(v) {
				return v
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the page shows %+v", what, v)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	wait("the active key listed", func(v keysView) bool {
		return !v.Hidden && len(v.Rows) == 1 && v.Rows[0][0] == string(first.ID) && v.Rows[0][1] == "active"
	})
	rotated, err := srv.RotateKey(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	next, _ := rotated.Active()
	v := wait("the rotation shown", func(v keysView) bool {
		return len(v.Rows) == 2 && v.Rows[0][1] == "retired" && v.Rows[1][0] == string(next.ID) && v.Rows[1][1] == "active"
	})
	if v.Rows[0][3] == "" {
		t.Errorf("the retired key shows no retirement time: %q", v.Rows[0])
	}
}
