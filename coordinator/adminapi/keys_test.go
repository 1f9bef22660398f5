package adminapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/epoch"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// keysAPI serves the admin API of a coordinator; signing says whether it
// signs grants.
func keysAPI(t *testing.T, signing bool) *Client {
	return keysAPIDelay(t, signing, 0)
}

// keysAPIDelay is keysAPI with the coordinator's KeyPublishDelay.
func keysAPIDelay(t *testing.T, signing bool, delay time.Duration) *Client {
	cfg := testenv.TenureConfig(t, 3*time.Second, 300*time.Millisecond, 4)
	cfg.SignGrants = signing
	cfg.KeyPublishDelay = delay
	srv, _ := testenv.StartTenureServer(t, cfg)
	mux := http.NewServeMux()
	Register(mux, srv)
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return &Client{Base: hs.URL}
}

// TestKeys: the key routes list, rotate and revoke the coordinator's
// signing keys, and answer a revocation of the active key, of an unknown
// key or of a malformed ID, and any request to a node that does not sign,
// with their codes.
func TestKeys(t *testing.T) {
	c := keysAPI(t, true)
	ctx := context.Background()
	var ks *epoch.KeySet
	deadline := time.Now().Add(5 * time.Second)
	for {
		var err error
		ks, err = c.Keys(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := ks.Active(); ok || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	first, ok := ks.Active()
	if !ok || len(ks.Keys()) != 1 {
		t.Fatalf("a new coordinator's keys: %+v", ks.Keys())
	}
	rotated, err := c.RotateKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	next, _ := rotated.Active()
	if old, _ := rotated.Lookup(first.ID); next.ID == first.ID || old.State != epoch.KeyRetired {
		t.Fatalf("after a rotation: %+v", rotated.Keys())
	}
	apiErr := func(err error, status int, code string) {
		t.Helper()
		var e *Error
		if !errors.As(err, &e) || e.Status != status || e.Code != code {
			t.Fatalf("err = %v, want %d %s", err, status, code)
		}
	}
	_, err = c.RevokeKey(ctx, next.ID)
	apiErr(err, http.StatusConflict, "active_key")
	_, err = c.RevokeKey(ctx, "0123456789abcdef")
	apiErr(err, http.StatusNotFound, "unknown_key")
	_, err = c.RevokeKey(ctx, "nothex")
	apiErr(err, http.StatusBadRequest, "bad_request")
	revoked, err := c.RevokeKey(ctx, first.ID)
	if err != nil {
		t.Fatal(err)
	}
	if old, _ := revoked.Lookup(first.ID); old.State != epoch.KeyRevoked || old.Revoked.IsZero() {
		t.Fatalf("after the revocation: %+v", old)
	}
	listed, err := c.Keys(ctx)
	if err != nil || len(listed.Keys()) != 2 {
		t.Fatalf("the list after the revocation: %+v, %v", listed, err)
	}

	off := keysAPI(t, false)
	_, err = off.Keys(ctx)
	apiErr(err, http.StatusNotFound, "signing_off")
	_, err = off.RotateKey(ctx)
	apiErr(err, http.StatusNotFound, "signing_off")
}

// TestKeysStaged: with a publish delay, POST /api/keys/rotate publishes a
// pending key and leaves the active one signing; a second rotation is
// 409 rotation_pending; ?now=true makes the pending key active at once;
// any other value of now is 400.
func TestKeysStaged(t *testing.T) {
	c := keysAPIDelay(t, true, time.Hour)
	ctx := context.Background()
	staged, err := c.RotateKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	active, _ := staged.Active()
	var pending epoch.PublicKey
	for _, k := range staged.Keys() {
		if k.State == epoch.KeyPending {
			pending = k
		}
	}
	if pending.ID == "" || active.ID == "" || len(staged.Keys()) != 2 {
		t.Fatalf("after a staged rotation: %+v", staged.Keys())
	}
	var e *Error
	if _, err := c.RotateKey(ctx); !errors.As(err, &e) || e.Status != http.StatusConflict || e.Code != "rotation_pending" {
		t.Fatalf("a rotation while one is pending: %v", err)
	}
	now, err := c.RotateKeyNow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := now.Active(); a.ID != pending.ID {
		t.Fatalf("?now=true made %s active, want the pending %s", a.ID, pending.ID)
	}
	if old, _ := now.Lookup(active.ID); old.State != epoch.KeyRetired {
		t.Fatalf("the key ?now=true retired: %+v", old)
	}
	err = c.do(ctx, http.MethodPost, "/api/keys/rotate?now=soon", new(rawJSON))
	if !errors.As(err, &e) || e.Status != http.StatusBadRequest {
		t.Fatalf("?now=soon: %v, want 400", err)
	}
}
