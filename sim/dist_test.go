package sim

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestDistQuantiles draws many samples from each distribution and checks
// that their empirical quantiles match the analytic ones (Quantile) within
// a tolerance, and that the parameters given in the syntax are honoured.
func TestDistQuantiles(t *testing.T) {
	tests := []struct {
		spec string
		// want: quantile -> expected value, checked against both the
		// analytic Quantile and the samples.
		want map[float64]time.Duration
	}{
		{"2s", map[float64]time.Duration{0.5: 2 * time.Second, 0.99: 2 * time.Second}},
		{"exp(mean=10m)", map[float64]time.Duration{0.5: 415888308335, 0.9: 1381551055796}}, // mean·ln2, mean·ln10
		{"uniform(min=1s,max=5s)", map[float64]time.Duration{0.5: 3 * time.Second, 0.9: 4600 * time.Millisecond}},
		{"lognormal(median=2ms,p99=20ms)", map[float64]time.Duration{0.5: 2 * time.Millisecond, 0.99: 20 * time.Millisecond}},
		{"lognormal(median=2ms,sigma=1)", map[float64]time.Duration{0.5: 2 * time.Millisecond}},
		{"pareto(p99=2s,max=20s)", map[float64]time.Duration{0.99: 2 * time.Second}},
		{"pareto(p50=150ms,p99=2s)", map[float64]time.Duration{0.5: 150 * time.Millisecond, 0.99: 2 * time.Second}},
		{"pareto(min=50ms,alpha=1.2)", map[float64]time.Duration{0.5: 89089871}}, // 50ms·2^(1/1.2)
		{"pareto(min=10ms,p99=1s)", map[float64]time.Duration{0.99: time.Second}},
		// Quantiles away from the steps of the discrete distribution.
		{"empirical(10ms,20ms,30ms,40ms)", map[float64]time.Duration{0.4: 20 * time.Millisecond, 0.7: 30 * time.Millisecond}},
	}
	r := rand.New(rand.NewPCG(7, 11))
	const n = 200000
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			d, err := ParseDist(tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			samples := make([]time.Duration, n)
			for i := range samples {
				samples[i] = d.Sample(r)
				if samples[i] < 0 {
					t.Fatalf("negative sample %v", samples[i])
				}
			}
			slices.Sort(samples)
			for q, want := range tt.want {
				if got := d.Quantile(q); !near(got, want, 0.001) {
					t.Errorf("Quantile(%g) = %v, want %v", q, got, want)
				}
				emp := samples[int(q*n)]
				// The sample quantile's error grows in the tail.
				tol := 0.03
				if q >= 0.99 {
					tol = 0.08
				}
				if !near(emp, want, tol) {
					t.Errorf("empirical %g-quantile %v, want %v ± %.0f%%", q, emp, want, tol*100)
				}
			}
		})
	}
}

func near(got, want time.Duration, rel float64) bool {
	diff := float64(got - want)
	if diff < 0 {
		diff = -diff
	}
	return diff <= rel*float64(want)+1 // +1 ns for exact values
}

func TestDistCap(t *testing.T) {
	d, err := ParseDist("pareto(p99=2s,alpha=0.5,max=20s)")
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	capped := 0
	for range 100000 {
		s := d.Sample(r)
		if s > 20*time.Second {
			t.Fatalf("sample %v above max", s)
		}
		if s == 20*time.Second {
			capped++
		}
	}
	if capped == 0 {
		t.Fatal("a heavy tail never reached the cap in 100000 samples")
	}
	if got := d.Quantile(0.9999); got != 20*time.Second {
		t.Fatalf("Quantile(0.9999) = %v, want the cap", got)
	}
}

func TestDistStringRoundTrips(t *testing.T) {
	for _, spec := range []string{
		"2s", "exp(mean=10m)", "uniform(min=1s,max=5s)", "lognormal(median=2ms,p99=20ms)",
		"pareto(p99=2s,max=20s)", "empirical(1ms,5ms)", "lognormal(median=1ms,sigma=0.5,max=1s)",
	} {
		d, err := ParseDist(spec)
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseDist(d.String())
		if err != nil {
			t.Fatalf("%s renders as %s, which does not parse: %v", spec, d, err)
		}
		for _, q := range []float64{0.1, 0.5, 0.99} {
			if !near(again.Quantile(q), d.Quantile(q), 0.01) {
				t.Fatalf("%s -> %s changes the %g-quantile from %v to %v", spec, d, q, d.Quantile(q), again.Quantile(q))
			}
		}
	}
}

func TestParseDistErrors(t *testing.T) {
	for _, tt := range []struct{ spec, want string }{
		{"", "not a duration"},
		{"-2s", "negative"},
		{"exp(10x)", "not a duration"},
		{"exp()", "positive mean"},
		{"weibull(k=2)", "unknown distribution"},
		{"exp(mean=1s", "missing closing"},
		{"uniform(min=5s,max=1s)", "min <= max"},
		{"lognormal(median=2ms)", "p99 or sigma"},
		{"lognormal(median=2ms,p99=1ms)", "must exceed"},
		{"pareto(min=1s,alpha=1,p99=2s)", "two of"},
		{"pareto(min=1s,alpha=-1)", "positive number"},
		{"exp(mean=1s,mode=2)", `unknown argument "mode"`},
		{"exp(mean=10s,max=1s)", "below the median"},
		{"empirical()", "without values"},
		{"fixed(1s,2s)", "one duration"},
	} {
		_, err := ParseDist(tt.spec)
		if err == nil {
			t.Errorf("ParseDist(%q) succeeded", tt.spec)
			continue
		}
		if !errors.Is(err, ErrBadDist) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseDist(%q) = %v, want an ErrBadDist mentioning %q", tt.spec, err, tt.want)
		}
	}
}

func TestEmpiricalFromFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gc.txt")
	// GC logs give milliseconds; durations work too.
	if err := os.WriteFile(path, []byte("# pauses\n12\n\n35.5\n2s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := ParseDist("empirical(file=" + path + ")")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := d.Quantile(1), 2*time.Second; got != want {
		t.Fatalf("max %v, want %v", got, want)
	}
	if got, want := d.Quantile(0.5), 35500*time.Microsecond; got != want {
		t.Fatalf("median %v, want %v", got, want)
	}
}
