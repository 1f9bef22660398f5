//go:build unix

package chaos_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/internal/chaos"
	"github.com/tenure-dev/tenure/internal/proctest"
	"github.com/tenure-dev/tenure/internal/testenv"
)

var (
	seed = flag.Uint64("chaos.seed", 1, "seed of the first run of TestChaos")
	runs = flag.Int("chaos.runs", 2, "fenced runs of TestChaos (one control run follows)")
	keep = flag.String("chaos.dir", "", "keep every run's folder under this directory (default: only a failing test's, in a temporary directory it prints)")
)

// TestChaos is the short version of `make chaos` that `make test` runs:
// two seeded runs of under half a minute of real processes under faults,
// which must keep every guarantee, the second of them the forging variant
// (signed grants, verifying workers, one of them forging tokens: none may
// land, and no honest write may be refused), and one control run without
// fencing, which the checker must catch.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes for a minute")
	}
	dsn, _ := testenv.PostgresForTest(t)
	bins := proctest.Build(t, "github.com/tenure-dev/tenure/cmd/tenure", "go.etcd.io/etcd/server/v3")
	base := *keep
	if base == "" {
		// Not t.TempDir: a failing run's folder must outlive the test.
		var err error
		if base, err = os.MkdirTemp("", "tenure-chaos-"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if !t.Failed() {
				os.RemoveAll(base)
			}
		})
	}
	for i := range *runs + 1 {
		control := i == *runs
		s := *seed + uint64(i)
		if control {
			s = *seed
		}
		// The second fenced run is the forging variant.
		forge := !control && i == 1
		name := map[bool]string{false: "fenced", true: "control"}[control]
		if forge {
			name = "forging"
		}
		t.Run(fmt.Sprintf("%s-seed-%d", name, s), func(t *testing.T) {
			dir := filepath.Join(base, fmt.Sprintf("seed-%d-%s", s, name))
			cfg := chaos.Config{
				Seed: s, Dir: dir, Tenure: bins[0], Etcd: bins[1], PostgresDSN: dsn,
				Duration: 28 * time.Second, Warmup: 4 * time.Second, Settle: 9 * time.Second,
				Workers: 6, Committers: 2,
				SessionTimeout: 2 * time.Second, HeartbeatInterval: 200 * time.Millisecond,
				RebalanceTimeout: 4 * time.Second, ElectionTTL: time.Second,
				Unfenced: control, Forge: forge,
			}
			if testing.Verbose() {
				cfg.Progress = os.Stdout
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			res, err := chaos.Run(ctx, cfg)
			if err != nil {
				t.Fatalf("seed %d: the run could not be carried out: %v (folder %s)", s, err, dir)
			}
			if !res.Passed() {
				for _, v := range res.Report.Violations {
					t.Log(v)
				}
				if control {
					t.Fatalf("seed %d: the control run, unfenced, passed the checker: it would miss stale writes (folder %s)", s, dir)
				}
				t.Fatalf("seed %d: %d violations (folder %s; replay: tenure chaos --seed %d --runs 1 --duration 28s --warmup 4s --settle 9s --workers 6 --committers 2 --session-timeout 2s --rebalance-timeout 4s --election-ttl 1s%s)",
					s, len(res.Report.Violations), dir, s, map[bool]string{true: " --forge"}[forge])
			}
			if control {
				t.Logf("seed %d: control run caught with %d violations", s, len(res.Report.Violations))
			}
			if forge {
				tried := 0
				for _, f := range res.Report.Stats.Forgeries {
					tried += f.Tried
				}
				if tried == 0 {
					t.Fatalf("seed %d: the forging variant forged nothing (folder %s)", s, dir)
				}
				t.Logf("seed %d: %d forgeries, all refused: %+v", s, tried, res.Report.Stats.Forgeries)
			}
		})
	}
}
