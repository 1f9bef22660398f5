// Package fencetest holds the checks that the tests of every fence
// implementation (etcdfence, sqlfence) share, so that each fence is held to
// the same rule in the same words. It is for tests only: production code
// must not import it.
package fencetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/tenure-dev/tenure/epoch"
)

// WantStale fails t unless err wraps [epoch.ErrStale] and is a
// [*epoch.StaleError] naming partition p, the rejected token tok and the
// fence's current token current.
func WantStale(t testing.TB, err error, p epoch.Partition, tok, current epoch.Token) {
	t.Helper()
	if !errors.Is(err, epoch.ErrStale) {
		t.Fatalf("err = %v, want one wrapping epoch.ErrStale", err)
	}
	var se *epoch.StaleError
	if !errors.As(err, &se) {
		t.Fatalf("err = %T %v, want *epoch.StaleError", err, err)
	}
	want := epoch.StaleError{Partition: p, Token: tok, Current: current}
	if *se != want {
		t.Fatalf("StaleError = %+v, want %+v", *se, want)
	}
}

// Model is the naive reference of a fence: the largest token admitted per
// partition. It refuses zero and negative tokens with [epoch.ErrNoToken],
// and otherwise admits a token unless it is below the largest one admitted.
type Model map[epoch.Partition]epoch.Token

// Check compares err, a fence's answer to token tok for partition p, with
// the model's, and records tok if the model admits it. It returns whether
// the model admitted tok and, when the fence disagrees, what the model
// wanted instead ("ErrNoToken", "stale with current 5", "admitted (model
// 3)"); want is "" when they agree.
func (m Model) Check(p epoch.Partition, tok epoch.Token, err error) (admitted bool, want string) {
	cur, known := m[p]
	switch {
	case tok <= 0:
		if !errors.Is(err, epoch.ErrNoToken) {
			return false, "ErrNoToken"
		}
		return false, ""
	case known && tok < cur:
		var se *epoch.StaleError
		if !errors.As(err, &se) || se.Current != cur || se.Token != tok || se.Partition != p {
			return false, fmt.Sprintf("stale with current %v", cur)
		}
		return false, ""
	default:
		if err != nil {
			return true, fmt.Sprintf("admitted (model %v)", cur)
		}
		m[p] = tok
		return true, ""
	}
}

// Racing sorts the answer err to a write with token tok, among writers
// racing with rising tokens: nil is an acceptance; a stale error must name
// a newer current token than tok, or t fails. Any other error fails t, and
// ok is false: the writer should stop.
func Racing(t testing.TB, err error, tok epoch.Token) (accepted, ok bool) {
	var se *epoch.StaleError
	switch {
	case err == nil:
		return true, true
	case errors.As(err, &se):
		if se.Current <= tok {
			t.Errorf("rejected %v with current %v", tok, se.Current)
		}
		return false, true
	default:
		t.Errorf("guarded write: %v", err)
		return false, false
	}
}
