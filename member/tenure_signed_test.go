package member

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/epoch"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// signedWriter is a handler that writes, every few milliseconds while its
// claim lives, to one fence that requires signed tokens and verifies them
// with the coordinator's published keys: every refusal as unverified is
// an error of the test (a claim without its signature, or with a wrong
// one), and the claims' tokens are remembered.
type signedWriter struct {
	t     *testing.T
	fence *epoch.MemFence
	v     *epoch.Verifier

	mu       sync.Mutex
	writes   int
	stale    int
	keysSeen map[epoch.KeyID]bool
}

func newSignedWriter(t *testing.T, ks *epoch.KeySet) *signedWriter {
	w := &signedWriter{t: t, keysSeen: map[epoch.KeyID]bool{}}
	// The topic ID is learnt from the first claim: the verifier of the
	// group's one topic.
	w.v = epoch.NewVerifier(epoch.VerifierConfig{Group: "g", Keys: ks, RequireSigned: true})
	return w
}

func (w *signedWriter) handler(c *Claim) {
	w.mu.Lock()
	if w.fence == nil {
		ks := w.v.Keys()
		w.v = epoch.NewVerifier(epoch.VerifierConfig{Group: "g", TopicID: c.TopicID(), Keys: ks, RequireSigned: true})
		w.fence = epoch.NewMemFence(w.v)
	}
	f := w.fence
	w.mu.Unlock()
	ctx := c.Context()
	for ctx.Err() == nil {
		st := c.Token()
		err := f.AdmitSigned(ctx, epoch.Partition(c.Partition()), st)
		w.mu.Lock()
		switch {
		case err == nil:
			w.writes++
			w.keysSeen[st.Key] = true
		case errors.Is(err, epoch.ErrStale):
			w.stale++ // a later owner wrote first: the claim is ending
		default:
			w.t.Errorf("claim %v: write refused: %v", c, err)
		}
		w.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (w *signedWriter) setKeys(ks *epoch.KeySet) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.v.SetKeys(ks)
}

// allSignedBy reports "" when every claim of the sessions carries a token
// signed by key.
func allSignedBy(sessions map[string]*Session, key epoch.KeyID) func() string {
	return func() string {
		for name, s := range sessions {
			for _, c := range s.Claims() {
				if st := c.Token(); st.Key != key {
					return fmt.Sprintf("%s's claim %v is %v, want signed by %s", name, c, st, key)
				}
			}
		}
		return ""
	}
}

// TestTenureSignedClaims: against tenure signing its grants, every claim's
// token carries the coordinator's signature from the moment the handler
// runs, and a fence that requires signatures admits every write of every
// owner through joins, a leave and a key rotation, with no refusal but
// the stale writes of a hand-off. After the rotation every live claim is
// signed again by the new key, so the old key can be revoked without
// refusing anyone.
func TestTenureSignedClaims(t *testing.T) {
	cfg := testenv.TenureConfig(t, testSession, testInterval, testParts)
	cfg.SignGrants = true
	srv, addr := testenv.StartTenureServer(t, cfg)
	brokers := []string{addr}
	eventuallyKeys := func() *epoch.KeySet {
		var ks *epoch.KeySet
		waitFor(t, 5*time.Second, func() string {
			var err error
			if ks, err = srv.SigningKeys(context.Background()); err != nil {
				return err.Error()
			}
			if _, ok := ks.Active(); !ok {
				return "no active key yet"
			}
			return ""
		})
		return ks
	}
	ks := eventuallyKeys()
	first, _ := ks.Active()
	w := newSignedWriter(t, ks)
	sessions := map[string]*Session{
		"a": join(t, testConfig(t, brokers), w.handler),
		"b": join(t, testConfig(t, brokers), w.handler),
		"c": join(t, testConfig(t, brokers), w.handler),
	}
	waitFor(t, 10*time.Second, stable(sessions))
	waitFor(t, 5*time.Second, allSignedBy(sessions, first.ID))

	rotated, err := srv.RotateKey(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	next, _ := rotated.Active()
	w.setKeys(rotated)
	waitFor(t, 5*time.Second, allSignedBy(sessions, next.ID))
	revoked, err := srv.RevokeKey(context.Background(), first.ID)
	if err != nil {
		t.Fatal(err)
	}
	w.setKeys(revoked)

	// c leaves: its partitions move to a and b under new tokens, signed
	// by the new key.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := sessions["c"].Close(ctx); err != nil {
		t.Fatal(err)
	}
	delete(sessions, "c")
	waitFor(t, 10*time.Second, stable(sessions))
	waitFor(t, 5*time.Second, allSignedBy(sessions, next.ID))

	// Two join together: a and b revoke and gain at once, so some
	// partitions wait for revocations and are taken at a later epoch,
	// which the coordinator signs again as their token follows it.
	sessions["d"] = join(t, testConfig(t, brokers), w.handler)
	sessions["e"] = join(t, testConfig(t, brokers), w.handler)
	waitFor(t, 10*time.Second, stable(sessions))
	waitFor(t, 5*time.Second, allSignedBy(sessions, next.ID))
	time.Sleep(100 * time.Millisecond)

	w.mu.Lock()
	defer w.mu.Unlock()
	if w.writes == 0 || !w.keysSeen[first.ID] || !w.keysSeen[next.ID] {
		t.Fatalf("%d writes admitted, under keys %v; want writes under both %s and %s", w.writes, w.keysSeen, first.ID, next.ID)
	}
	t.Logf("%d writes admitted, %d stale at hand-offs", w.writes, w.stale)
}
