package fencetest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/tenure-dev/tenure/epoch"
)

// TestModelAgreesWithMemFence drives the model and epoch.MemFence with the
// same random calls: the model must accept every answer of the real fence,
// and admit exactly what the fence admits.
func TestModelAgreesWithMemFence(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var f epoch.MemFence
		m := Model{}
		for range rapid.IntRange(1, 50).Draw(t, "n") {
			p := epoch.Partition(rapid.IntRange(0, 2).Draw(t, "partition"))
			tok := epoch.Token(rapid.Int64Range(-2, 8).Draw(t, "token"))
			err := f.Admit(context.Background(), p, tok)
			admitted, want := m.Check(p, tok, err)
			if want != "" {
				t.Fatalf("Admit(%d, %v) = %v, model wants %s", p, tok, err, want)
			}
			if admitted != (err == nil) {
				t.Fatalf("Admit(%d, %v) = %v, model admitted: %v", p, tok, err, admitted)
			}
		}
	})
}

// TestModelCatchesWrongAnswers: every answer that breaks the rule is
// reported, and a wrongly refused token is not recorded.
func TestModelCatchesWrongAnswers(t *testing.T) {
	stale := func(tok, cur epoch.Token) error {
		return fmt.Errorf("wrapped: %w", &epoch.StaleError{Partition: 1, Token: tok, Current: cur})
	}
	for _, tt := range []struct {
		name string
		tok  epoch.Token
		err  error
		want string
	}{
		{"zero token admitted", 0, nil, "ErrNoToken"},
		{"negative token refused as stale", -1, stale(-1, 5), "ErrNoToken"},
		{"older token admitted", 4, nil, "stale with current 5"},
		{"older token refused with the wrong current", 4, stale(4, 6), "stale with current 5"},
		{"older token refused with another error", 4, errors.New("boom"), "stale with current 5"},
		{"equal token refused", 5, stale(5, 5), "admitted (model 5)"},
		{"newer token refused", 6, stale(6, 5), "admitted (model 5)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := Model{1: 5}
			_, want := m.Check(1, tt.tok, tt.err)
			if want != tt.want {
				t.Errorf("Check(1, %v, %v) wants %q, want %q", tt.tok, tt.err, want, tt.want)
			}
			if m[1] != 5 {
				t.Errorf("model at %v after a wrong answer, want 5", m[1])
			}
		})
	}
}

func TestRacing(t *testing.T) {
	for _, tt := range []struct {
		name         string
		err          error
		accepted, ok bool
		wantFail     bool
	}{
		{"accepted", nil, true, true, false},
		{"rejected by a newer token", &epoch.StaleError{Token: 3, Current: 4}, false, true, false},
		{"rejected by an equal token", &epoch.StaleError{Token: 3, Current: 3}, false, true, true},
		{"other error", errors.New("boom"), false, false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{TB: t}
			accepted, ok := Racing(rec, tt.err, 3)
			if accepted != tt.accepted || ok != tt.ok || rec.failed != tt.wantFail {
				t.Errorf("Racing(%v) = %v, %v, test failed %v; want %v, %v, %v",
					tt.err, accepted, ok, rec.failed, tt.accepted, tt.ok, tt.wantFail)
			}
		})
	}
}

// recorder notes whether a check failed the test instead of failing it.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Errorf(string, ...any) { r.failed = true }
