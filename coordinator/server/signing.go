package server

import (
	"context"
	"crypto/ed25519"
	crand "crypto/rand"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator"
	"github.com/tenure-dev/tenure/coordinator/store"
	"github.com/tenure-dev/tenure/epoch"
	"github.com/tenure-dev/tenure/epoch/grantwire"
)

// Signed grants (Config.SignGrants). The group core names, in each reply,
// the ownerships it tells its member of (coordinator.Reply.Grants); the
// server signs each with the active key of the store's key ring and puts
// the signatures in the response as a tagged field (epoch/grantwire) that
// stock clients skip. Signing happens as a Ready is performed, under the
// group's lock, before the reply waits for its writes: only grants are
// signed, so a heartbeat that changed nothing costs one comparison in the
// core and nothing here.
//
// The key ring is the store's (store.KeyStore), shared by every node of
// an HA set: it is loaded before the first group is, and serving does not
// start without it; a ring without an active key gets one. It is reloaded
// when the store's watch reports a change (another node rotated) and every
// KeyRefresh. When the active key changes, every loaded group is asked to
// grant its members everything again under the new key
// (coordinator.ReissueGrants), and so is every group loaded while a
// retired key still verifies (a fail-over in the middle of a rotation).
// Every KeyRefresh a node also revokes the keys retired for KeyRetention or
// longer (store.Expire): any node may, as every change of the ring is a
// compare-and-swap.

// ring is the key ring as a node uses it: the signer of the active key,
// the public keys, and whether a retired key still verifies.
type ring struct {
	signer   *epoch.Signer
	public   *epoch.KeySet
	retiring bool
}

// signing is the server's grant-signing state.
type signing struct {
	on        bool
	store     store.KeyStore
	retention time.Duration
	cur       atomic.Pointer[ring]

	// mu serializes reloads, so that a slow reload of an older ring
	// never replaces a newer one.
	mu sync.Mutex

	signed  prometheus.Counter
	rotated prometheus.Counter
}

func newSigning(cfg *Config) *signing {
	sg := &signing{on: cfg.SignGrants, store: cfg.KeyStore, retention: cfg.KeyRetention,
		signed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tenure_grants_signed_total",
			Help: "Ownership grants signed into responses (Config.SignGrants): one per partition a reply grants.",
		}),
		rotated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tenure_signing_key_changes_total",
			Help: "Times this node started signing with another key (a rotation, its own or another node's, seen here).",
		}),
	}
	if sg.store == nil {
		sg.store, _ = cfg.Store.(store.KeyStore)
	}
	if cfg.Registerer != nil && sg.on {
		cfg.Registerer.MustRegister(sg.signed, sg.rotated)
	}
	return sg
}

// ErrSigningOff is returned by the key operations of a server that does
// not sign grants.
var ErrSigningOff = errors.New("server: grant signing is off (tenure serve --sign-grants)")

// startKeys loads the key ring (creating the first key if there is none)
// and keeps it current until the returned function is called.
func (s *Server) startKeys(ctx context.Context) (stop func(), err error) {
	if !s.signing.on {
		return func() {}, nil
	}
	if err := s.reloadKeys(ctx, true); err != nil {
		return nil, fmt.Errorf("server: loading the signing keys: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.refreshKeys(ctx)
	}()
	return func() {
		cancel()
		<-done
	}, nil
}

// refreshKeys keeps the ring current until ctx ends: on every signal of
// the store's watch, if it has one, and every KeyRefresh, when it also
// revokes the keys past their retention.
func (s *Server) refreshKeys(ctx context.Context) {
	var changed <-chan struct{}
	if w, ok := s.signing.store.(store.KeyWatcher); ok {
		changed = w.WatchKeys(ctx)
	}
	follow(ctx, changed, s.cfg.KeyRefresh, func(tick bool) {
		if err := s.reloadKeys(ctx, tick); err != nil && ctx.Err() == nil {
			s.log.Warn("signing keys could not be reloaded; the node signs with the key it has", zap.Error(err))
		}
	})
}

// reloadKeys reads the ring, gives it an active key if it has none and,
// with expire, revokes the keys past their retention; then it uses it.
func (s *Server) reloadKeys(ctx context.Context, expire bool) error {
	sg := s.signing
	sg.mu.Lock()
	defer sg.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	defer cancel()
	keys, err := s.updateKeys(ctx, func(keys []store.SigningKey, note noteFunc) ([]store.SigningKey, bool, error) {
		keys, changed, err := withActiveKey(keys, note)
		if err != nil {
			return nil, false, err
		}
		if next, promoted := store.Promote(keys, time.Now(), s.cfg.KeyPublishDelay); promoted {
			keys, changed = next, true
			a, _ := store.Active(keys)
			note("signing key activated after its publish delay", zap.String("key", string(a.ID())),
				zap.Duration("publish_delay", s.cfg.KeyPublishDelay))
		}
		if expire {
			var revoked bool
			if keys, revoked = store.Expire(keys, time.Now(), sg.retention); revoked {
				changed = true
				note("retired signing keys revoked after their retention", zap.Duration("retention", sg.retention))
			}
		}
		return keys, changed, nil
	})
	if err != nil {
		return err
	}
	return s.useKeys(keys)
}

// withActiveKey returns keys with a new active key if they have none (a
// new ring), and reports whether it added one.
func withActiveKey(keys []store.SigningKey, note noteFunc) ([]store.SigningKey, bool, error) {
	if _, ok := store.Active(keys); ok {
		return keys, false, nil
	}
	k, err := newSigningKey(time.Now())
	if err != nil {
		return nil, false, err
	}
	note("signing key created: the key ring had no active key", zap.String("key", string(k.ID())))
	return store.Rotate(keys, k, time.Now()), true, nil
}

// useKeys makes keys the node's ring; a new active key makes every loaded
// group grant everything again.
func (s *Server) useKeys(keys []store.SigningKey) error {
	sg := s.signing
	active, ok := store.Active(keys)
	if !ok {
		return errors.New("server: the key ring has no active key")
	}
	signer, err := epoch.NewSigner(active.Seed)
	if err != nil {
		return err
	}
	public, err := store.PublicKeys(keys)
	if err != nil {
		return err
	}
	r := &ring{signer: signer, public: public}
	for _, k := range keys {
		r.retiring = r.retiring || k.State == epoch.KeyRetired
	}
	prev := sg.cur.Swap(r)
	if prev != nil && prev.signer.ID() != signer.ID() {
		sg.rotated.Inc()
		s.log.Info("signing with a new key; every member is granted its partitions again under it",
			zap.String("key", string(signer.ID())), zap.String("previous", string(prev.signer.ID())))
		s.reissueGrants()
	} else if prev == nil {
		s.log.Info("signing grants", zap.String("key", string(signer.ID())), zap.Int("keys", len(keys)))
	}
	return nil
}

// reissueGrants asks every loaded group to grant its members everything
// again.
func (s *Server) reissueGrants() {
	now := time.Now()
	for _, tm := range s.ledTerms(now) {
		for _, e := range tm.groups.snapshot() {
			e.mu.Lock()
			if !e.gone && !e.offline && e.g != nil {
				s.stepCore(e, nil, now, coordinator.ReissueGrants{})
			}
			e.mu.Unlock()
		}
	}
}

// restoredGrants is called on every group the node loads: while a retired
// key still verifies, its members may hold only the retired key's
// signatures (a rotation whose reissue a fail-over interrupted), so they
// are granted everything again.
func (s *Server) restoredGrants(g *coordinator.Group, now time.Time) {
	if r := s.signing.cur.Load(); r != nil && r.retiring {
		g.Step(now, coordinator.ReissueGrants{})
	}
}

// newSigningKey returns a new active key of random seed.
func newSigningKey(now time.Time) (store.SigningKey, error) {
	seed := make([]byte, ed25519.SeedSize)
	if _, err := crand.Read(seed); err != nil {
		return store.SigningKey{}, err
	}
	return store.NewSigningKey(seed, now)
}

// sign signs r's grants for group into its response, if the response's
// version carries tagged fields. e.mu is held.
func (s *Server) sign(group string, r *coordinator.Reply) {
	ring := s.signing.cur.Load()
	if ring == nil || r.Grants == nil || r.Msg == nil || !r.Msg.IsFlexible() {
		return
	}
	tags := grantwire.TagsOf(r.Msg)
	if tags == nil {
		return
	}
	gs := grantwire.Grants{Key: ring.signer.ID(), Grants: make([]grantwire.Grant, len(r.Grants.Partitions))}
	for i, p := range r.Grants.Partitions {
		st := ring.signer.Sign(epoch.Grant{Group: group, TopicID: p.TopicID, Partition: epoch.Partition(p.Partition),
			Token: p.Token, Member: r.Grants.Member})
		gs.Grants[i] = grantwire.Grant{TopicID: p.TopicID, Partition: p.Partition, Token: p.Token, Sig: st.Sig}
	}
	grantwire.Put(tags, gs)
	s.signing.signed.Add(float64(len(gs.Grants)))
}

// SigningKeys returns the public keys grants are verified with: what
// `tenure keys list`, the admin API and the status page publish. Any node
// of an HA set answers: with the ring it signs with, which follows the
// store's watch, or, before it loaded one, with the store's.
func (s *Server) SigningKeys(ctx context.Context) (*epoch.KeySet, error) {
	if !s.signing.on {
		return nil, ErrSigningOff
	}
	if r := s.signing.cur.Load(); r != nil {
		return r.public, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	defer cancel()
	ring, err := s.signing.store.LoadKeys(ctx)
	if err != nil {
		return nil, err
	}
	return store.PublicKeys(ring.Keys)
}

// RotateKey makes a new key the active one and retires the active key,
// which verifies until it is revoked (KeyRetention after, or by
// RevokeKey); every node signs with the new key as soon as it sees the
// ring change (its watch) and grants its members everything again under
// it. With a KeyPublishDelay the new key is first published as pending
// (it verifies, it does not sign) and becomes active after the delay; a
// rotation while one is pending is refused (store.ErrRotationPending:
// RotateKeyNow activates it). It returns the new key set. Any node of an
// HA set may rotate.
func (s *Server) RotateKey(ctx context.Context) (*epoch.KeySet, error) {
	return s.rotate(ctx, s.cfg.KeyPublishDelay == 0)
}

// RotateKeyNow is RotateKey without the publish delay, for a compromised
// key: the pending key if there is one, else a new key, signs at once.
// Resources refuse its tokens until they fetch the new key set.
func (s *Server) RotateKeyNow(ctx context.Context) (*epoch.KeySet, error) {
	return s.rotate(ctx, true)
}

func (s *Server) rotate(ctx context.Context, now bool) (*epoch.KeySet, error) {
	return s.changeKeys(ctx, func(keys []store.SigningKey, note noteFunc) ([]store.SigningKey, bool, error) {
		at := time.Now()
		if p, ok := store.Pending(keys); ok && now {
			note("signing key activated before its publish delay", zap.String("key", string(p.ID())))
			out, _ := store.ActivatePending(keys, at)
			return out, true, nil
		}
		k, err := newSigningKey(at)
		if err != nil {
			return nil, false, err
		}
		if now {
			note("signing key rotated", zap.String("key", string(k.ID())))
			return store.Rotate(keys, k, at), true, nil
		}
		out, err := store.Stage(keys, k)
		if err != nil {
			return nil, false, err
		}
		note("signing key published; it signs after the publish delay", zap.String("key", string(k.ID())),
			zap.Duration("publish_delay", s.cfg.KeyPublishDelay))
		return out, true, nil
	})
}

// RevokeKey revokes a retired key at once: a token it signed is refused
// from then on (by verifiers that have the new key set). Revoking a
// revoked key changes nothing. The active key cannot be revoked
// (store.ErrActiveKey); an unknown one is store.ErrNoSuchKey.
func (s *Server) RevokeKey(ctx context.Context, id epoch.KeyID) (*epoch.KeySet, error) {
	return s.changeKeys(ctx, func(keys []store.SigningKey, note noteFunc) ([]store.SigningKey, bool, error) {
		out, changed, err := store.RevokeKey(keys, id, time.Now())
		if changed {
			note("signing key revoked", zap.String("key", string(id)))
		}
		return out, changed, err
	})
}

func (s *Server) changeKeys(ctx context.Context, fn func([]store.SigningKey, noteFunc) ([]store.SigningKey, bool, error)) (*epoch.KeySet, error) {
	sg := s.signing
	if !sg.on {
		return nil, ErrSigningOff
	}
	sg.mu.Lock()
	defer sg.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	defer cancel()
	// A change may come before the node loaded its ring (the admin API
	// answers while Serve starts) and find a new, empty ring: the ring
	// gets its active key first, in the same write, as a load would give
	// it. Else a staged rotation would store a ring of one pending key,
	// which no node can sign with, and then fail.
	keys, err := s.updateKeys(ctx, func(keys []store.SigningKey, note noteFunc) ([]store.SigningKey, bool, error) {
		keys, created, err := withActiveKey(keys, note)
		if err != nil {
			return nil, false, err
		}
		out, changed, err := fn(keys, note)
		return out, changed || created, err
	})
	if err != nil {
		return nil, err
	}
	if err := s.useKeys(keys); err != nil {
		return nil, err
	}
	return store.PublicKeys(keys)
}

// noteFunc records a log line (info) saying what a change of the key ring
// did.
type noteFunc func(msg string, fields ...zap.Field)

// updateKeys is store.UpdateKeys for the node: fn's notes are logged only
// once the ring it changed is stored. An attempt that loses the
// compare-and-swap to another node (which made the same change: two
// nodes promoting a pending key, say) is tried again from the new ring,
// and its notes are dropped, so a change is logged by the node that made
// it, once.
func (s *Server) updateKeys(ctx context.Context, fn func([]store.SigningKey, noteFunc) ([]store.SigningKey, bool, error)) ([]store.SigningKey, error) {
	type line struct {
		msg    string
		fields []zap.Field
	}
	var lines []line
	keys, err := store.UpdateKeys(ctx, s.signing.store, func(keys []store.SigningKey) ([]store.SigningKey, bool, error) {
		lines = lines[:0]
		out, changed, err := fn(keys, func(msg string, fields ...zap.Field) { lines = append(lines, line{msg, fields}) })
		if err != nil || !changed {
			lines = lines[:0]
		}
		return out, changed, err
	})
	if err != nil {
		return nil, err
	}
	for _, l := range lines {
		s.log.Info(l.msg, l.fields...)
	}
	return keys, nil
}
