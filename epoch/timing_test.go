package epoch_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/epoch"
)

func TestTimingValidate(t *testing.T) {
	const s = time.Second
	ok := epoch.Timing{
		HeartbeatInterval: 3 * s,
		SessionTimeout:    10 * s,
		RebalanceTimeout:  30 * s,
		MaxDrift:          0.01,
		Margin:            100 * time.Millisecond,
	}
	with := func(f func(*epoch.Timing)) epoch.Timing {
		t := ok
		f(&t)
		return t
	}
	tests := []struct {
		name   string
		timing epoch.Timing
		want   []string // one substring per expected violation, in order
	}{
		{"worked example", ok, nil},
		{"defaults", epoch.DefaultTiming(), nil},
		{"heartbeat × 3 equals session", with(func(t *epoch.Timing) {
			t.HeartbeatInterval, t.SessionTimeout, t.MaxDrift, t.Margin = 3*s, 9*s, 0, time.Millisecond
		}), nil},
		{"suspect deadline 1ns above 2 heartbeats", with(func(t *epoch.Timing) {
			t.MaxDrift, t.Margin = 0, 4*s-1 // suspect 6s+1ns, 2 × 3s = 6s
		}), nil},
		{"heartbeat × 3 just within session", with(func(t *epoch.Timing) {
			t.HeartbeatInterval = 3333333333 // × 3 is 1ns short of 10s
		}), nil},
		{"rebalance timeout equals heartbeat", with(func(t *epoch.Timing) { t.RebalanceTimeout = 3 * s }), nil},
		{"zero drift", with(func(t *epoch.Timing) { t.MaxDrift = 0 }), nil},
		{"drift just below 0.5", with(func(t *epoch.Timing) {
			t.HeartbeatInterval, t.SessionTimeout = s, 10*s // suspect 4.9s > 2s
			t.MaxDrift = 0.49
		}), nil},

		{"zero heartbeat", with(func(t *epoch.Timing) { t.HeartbeatInterval = 0 }),
			[]string{"heartbeat interval 0s must be positive"}},
		{"negative session", with(func(t *epoch.Timing) { t.SessionTimeout = -s }),
			[]string{"session timeout -1s must be positive"}},
		{"zero rebalance", with(func(t *epoch.Timing) { t.RebalanceTimeout = 0 }),
			[]string{"rebalance timeout 0s must be positive"}},
		{"negative drift", with(func(t *epoch.Timing) { t.MaxDrift = -0.01 }),
			[]string{"max drift -0.01 must be in [0, 0.5)"}},
		{"drift 0.5", with(func(t *epoch.Timing) { t.MaxDrift = 0.5 }),
			[]string{"max drift 0.5 must be in [0, 0.5)"}},
		{"NaN drift", with(func(t *epoch.Timing) { t.MaxDrift = math.NaN() }),
			[]string{"max drift NaN must be in [0, 0.5)"}},
		{"zero margin", with(func(t *epoch.Timing) { t.Margin = 0 }),
			[]string{"margin 0s must be positive"}},
		{"negative margin", with(func(t *epoch.Timing) { t.Margin = -time.Millisecond }),
			[]string{"margin -1ms must be positive"}},
		{"heartbeat × 3 above session", with(func(t *epoch.Timing) {
			t.HeartbeatInterval = 3333333334 // × 3 is 2ns past 10s; × 2 is below the 9.8s suspect deadline
		}), []string{"heartbeat interval 3.333333334s × 3 exceeds session timeout 10s"}},
		{"suspect deadline equals 2 heartbeats", with(func(t *epoch.Timing) {
			t.MaxDrift, t.Margin = 0, 4*s
		}), []string{"suspect deadline 6s (session timeout 10s × (1 − 0) − margin 4s) must exceed 2 × heartbeat interval 3s"}},
		{"margin eats the suspect deadline", with(func(t *epoch.Timing) { t.Margin = 12 * s }),
			[]string{"suspect deadline -2.1s (session timeout 10s × (1 − 0.01) − margin 12s) must exceed 2 × heartbeat interval 3s"}},
		{"large drift shortens the suspect deadline", with(func(t *epoch.Timing) { t.MaxDrift = 0.4 }),
			[]string{"suspect deadline 5.9s (session timeout 10s × (1 − 0.4) − margin 100ms) must exceed 2 × heartbeat interval 3s"}},
		{"rebalance shorter than heartbeat", with(func(t *epoch.Timing) { t.RebalanceTimeout = s }),
			[]string{"rebalance timeout 1s is shorter than heartbeat interval 3s"}},
		{"rebalance 1ns shorter than heartbeat", with(func(t *epoch.Timing) { t.RebalanceTimeout = 3*s - 1 }),
			[]string{"rebalance timeout 2.999999999s is shorter than heartbeat interval 3s"}},
		{"every field wrong reports fields only", epoch.Timing{MaxDrift: 1, Margin: -1}, []string{
			"heartbeat interval 0s must be positive",
			"session timeout 0s must be positive",
			"rebalance timeout 0s must be positive",
			"max drift 1 must be in [0, 0.5)",
			"margin -1ns must be positive",
		}},
		{"several relations at once", epoch.Timing{
			HeartbeatInterval: 5 * s, SessionTimeout: 10 * s, RebalanceTimeout: s, MaxDrift: 0.01, Margin: s,
		}, []string{
			"heartbeat interval 5s × 3 exceeds session timeout 10s",
			"suspect deadline 8.9s (session timeout 10s × (1 − 0.01) − margin 1s) must exceed 2 × heartbeat interval 5s",
			"rebalance timeout 1s is shorter than heartbeat interval 5s",
		}},
		{"huge durations do not overflow", epoch.Timing{
			HeartbeatInterval: math.MaxInt64, SessionTimeout: math.MaxInt64, RebalanceTimeout: math.MaxInt64,
			MaxDrift: 0.01, Margin: s,
		}, []string{
			"× 3 exceeds session timeout",
			"must exceed 2 × heartbeat interval",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.timing.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, epoch.ErrUnsafeTiming) {
				t.Fatalf("Validate() = %v, want an error wrapping ErrUnsafeTiming", err)
			}
			var errs []error
			if j, ok := err.(interface{ Unwrap() []error }); ok {
				errs = j.Unwrap()
			} else {
				errs = []error{err}
			}
			if len(errs) != len(tt.want) {
				t.Fatalf("Validate() reported %d violations, want %d:\n%v", len(errs), len(tt.want), err)
			}
			for i, e := range errs {
				if !errors.Is(e, epoch.ErrUnsafeTiming) {
					t.Errorf("violation %q does not wrap ErrUnsafeTiming", e)
				}
				if !strings.HasPrefix(e.Error(), "epoch: unsafe timing: ") || !strings.Contains(e.Error(), tt.want[i]) {
					t.Errorf("violation %d = %q, want it to contain %q", i, e, tt.want[i])
				}
			}
		})
	}
}

func TestTimingWindow(t *testing.T) {
	tm := epoch.Timing{HeartbeatInterval: time.Second, SessionTimeout: 10 * time.Second,
		RebalanceTimeout: time.Minute, MaxDrift: 0.01, Margin: 100 * time.Millisecond}
	want := epoch.Window{SessionTimeout: 10 * time.Second, MaxDrift: 0.01, Margin: 100 * time.Millisecond}
	if got := tm.Window(); got != want {
		t.Errorf("Window() = %+v, want %+v", got, want)
	}
	if got := tm.SuspectAfter(); got != 9800*time.Millisecond {
		t.Errorf("SuspectAfter() = %v, want 9.8s", got)
	}
	if got := epoch.DefaultTiming().SuspectAfter(); got != 44050*time.Millisecond {
		t.Errorf("DefaultTiming().SuspectAfter() = %v, want 44.05s as documented", got)
	}
}
