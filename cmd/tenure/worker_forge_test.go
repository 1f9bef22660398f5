package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/coordinator/adminapi"
	"github.com/tenure-dev/tenure/epoch"
	"github.com/tenure-dev/tenure/internal/testenv"
	"github.com/tenure-dev/tenure/internal/workload"
)

// TestWorkerForgeVerified: against a coordinator that signs its grants,
// two workers verify every token with the keys its admin API publishes;
// one of them also forges a token every 20 ms, of every kind. Every
// forgery is refused as unverified and none lands, while both keep
// writing, through a key rotation too. The control is a forging worker
// whose resource does not verify: its forgeries land.
func TestWorkerForgeVerified(t *testing.T) {
	cfg := testenv.TenureConfig(t, pauseSession, pauseInterval, pauseParts)
	cfg.SignGrants = true
	srv, broker := testenv.StartTenureServer(t, cfg)
	mux := http.NewServeMux()
	adminapi.Register(mux, srv)
	hs := httptest.NewServer(mux)
	defer hs.Close()
	etcd := testenv.EtcdForTest(t)
	dir := t.TempDir()
	common := []string{
		"--brokers", broker, "--group", "forge", "--topic", "work",
		"--session-timeout", pauseSession.String(), "--rebalance-timeout", "2s",
		"--work-interval", "20ms", "--commit-every", "5",
		"--resource", "etcd", "--etcd-endpoints", etcd.Endpoints[0],
	}
	verified := append(append([]string{}, common...), "--etcd-prefix", "forge-verified", "--verify-keys", hs.URL)
	honest := startWorker(t, "honest", append(append([]string{}, verified...), "--attempt-log", filepath.Join(dir, "honest.jsonl")))
	forger := startWorker(t, "forger", append(append([]string{}, verified...), "--attempt-log", filepath.Join(dir, "forger.jsonl"),
		"--forge-every", "20ms"))
	time.Sleep(time.Second)
	rotatedAt := time.Now()
	if _, err := (&adminapi.Client{Base: hs.URL}).RotateKey(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	forger.stop(t)
	honest.stop(t)

	recs, err := workload.NewEtcdResource(etcd.Client(t), "forge-verified").Records(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Seq < 0 {
			t.Errorf("a forged record landed: %+v", r.Record)
		}
	}
	forged := map[string]int{}
	for _, w := range []struct {
		name string
		log  string
	}{{"honest", "honest.jsonl"}, {"forger", "forger.jsonl"}} {
		f, err := os.Open(filepath.Join(dir, w.log))
		if err != nil {
			t.Fatal(err)
		}
		as, err := workload.ReadAttempts(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range as {
			switch {
			case a.Op == workload.OpForge:
				if a.Outcome != workload.OutcomeUnverified {
					t.Errorf("forgery %s: outcome %s (%s), want unverified", a.Cause, a.Outcome, a.Err)
				}
				forged[a.Cause]++
			case a.Outcome == workload.OutcomeUnverified && a.T0.Before(rotatedAt):
				// After the rotation a write may be refused until the
				// worker fetched the new key (it asks at once).
				t.Errorf("%s's own %s at %v refused before any rotation: %s", w.name, a.Op, a.T0, a.Err)
			}
		}
	}
	for _, kind := range []string{workload.ForgeInvented, workload.ForgeOtherPartition, workload.ForgeRaised,
		workload.ForgeStrangerKey, workload.ForgeOtherMember, workload.ForgeTampered} {
		if forged[kind] == 0 {
			t.Errorf("no forgery %q tried (%v)", kind, forged)
		}
	}
	written := 0
	for _, w := range append(honest.outcomes(), forger.outcomes()...) {
		if w.Err == nil {
			written++
		}
		if errors.Is(w.Err, epoch.ErrStale) {
			t.Errorf("an honest write was refused as stale: %+v", w.Record)
		}
	}
	if written == 0 {
		t.Fatal("no honest write")
	}
	for _, w := range []*testWorker{honest, forger} {
		if !strings.Contains(w.logs.String(), "verifying tokens with the coordinator's keys") {
			t.Errorf("%s's log does not say it verifies", w.name)
		}
	}
	t.Logf("%d honest writes, forgeries %v, all refused", written, forged)

	// The control: the forger's resource does not verify.
	control := startWorker(t, "control", append(append([]string{}, common...), "--etcd-prefix", "forge-control", "--forge-every", "20ms"))
	pollUntil(t, 10*time.Second, "a forgery landing where nothing verifies", func() string {
		recs, err := workload.NewEtcdResource(etcd.Client(t), "forge-control").Records(context.Background())
		if err != nil {
			return err.Error()
		}
		for _, r := range recs {
			if r.Seq < 0 {
				return ""
			}
		}
		return "none yet"
	})
	control.stop(t)
}
