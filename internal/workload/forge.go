package workload

import (
	"context"
	"crypto/ed25519"
	crand "crypto/rand"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/epoch"
	"github.com/tenure-dev/tenure/member"
)

// A Forger is the hostile (or merely buggy) client of a chaos run's
// forging variant: beside a worker's honest work, it appends records under
// tokens it makes up from what it has, through the same fenced resources,
// so that the run shows every one refused and no honest owner disturbed.
// With verifying resources ([Verify]) each forgery is refused as
// unverified; without, the invented tokens land and raise the fences, and
// the honest owners are refused from then on: what the checker must catch
// in the variant's control run.
//
// Forged records have negative sequence numbers, which no honest record
// has: a forged record that landed is visible in the resource as such.
// Each append goes to the attempt log (through [LogAttempts]) as op
// "forge", with the forgery's kind as its cause.

// The kinds of forgery, in the order a Forger tries them.
const (
	// ForgeInvented: a token far above any the forger was given,
	// unsigned: a bug that writes an offset where the token belongs.
	ForgeInvented = "invented"
	// ForgeOtherPartition: the forger's own signed token, for a
	// partition it was not granted.
	ForgeOtherPartition = "other-partition"
	// ForgeRaised: its own signature on a raised token.
	ForgeRaised = "raised"
	// ForgeStrangerKey: a token for the partition signed by a key of its
	// own, which the coordinator never published.
	ForgeStrangerKey = "stranger-key"
	// ForgeOtherMember: its own token claimed for another member.
	ForgeOtherMember = "other-member"
	// ForgeTampered: its own token with a byte of the signature changed.
	ForgeTampered = "tampered"
)

var forgeries = []string{ForgeInvented, ForgeOtherPartition, ForgeRaised, ForgeStrangerKey, ForgeOtherMember, ForgeTampered}

// ForgerConfig configures a Forger.
type ForgerConfig struct {
	// Resource is where the forged records go: the worker's own.
	Resource Resource
	// Name is the Worker of the forged records.
	Name string
	// Group and Partitions are the group's and the topic's: the forger
	// signs grants of them with its stranger key, and aims at partitions
	// below Partitions.
	Group      string
	TopicID    [16]byte
	Partitions int32
	// Every is the time between two forgeries. Default 200 ms.
	Every time.Duration
	// Claims returns the worker's claims, whose tokens it abuses.
	Claims func() []*member.Claim
	// Attempts, if not nil, is the attempt log the resource's appends go
	// to (LogAttempts): the forger marks its calls so that they are
	// logged as forgeries.
	Attempts *AttemptLog
	// Logger receives a line per forgery that was admitted.
	Logger *zap.Logger
}

// Forger forges tokens; see the package's chaos documentation above.
type Forger struct {
	cfg      ForgerConfig
	stranger *epoch.Signer
	rng      *rand.Rand
	n        atomic.Int64
	// Admitted counts the forgeries a resource admitted.
	admitted atomic.Int64
}

// NewForger returns a forger for cfg.
func NewForger(cfg ForgerConfig) (*Forger, error) {
	if cfg.Resource == nil || cfg.Claims == nil || cfg.Partitions <= 0 {
		return nil, errors.New("workload: a forger needs a resource, the claims and the partition count")
	}
	if cfg.Every <= 0 {
		cfg.Every = 200 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	seed := make([]byte, ed25519.SeedSize)
	if _, err := crand.Read(seed); err != nil {
		return nil, err
	}
	stranger, err := epoch.NewSigner(seed)
	if err != nil {
		return nil, err
	}
	var s [32]byte
	if _, err := crand.Read(s[:]); err != nil {
		return nil, err
	}
	return &Forger{cfg: cfg, stranger: stranger, rng: rand.New(rand.NewChaCha8(s))}, nil
}

// Forged returns how many forgeries were tried, and how many a resource
// admitted.
func (f *Forger) Forged() (tried, admitted int64) { return f.n.Load(), f.admitted.Load() }

// Run forges until ctx ends.
func (f *Forger) Run(ctx context.Context) {
	t := time.NewTicker(f.cfg.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f.forgeOnce(ctx)
	}
}

// forgeOnce makes one forgery and appends it.
func (f *Forger) forgeOnce(ctx context.Context) {
	n := f.n.Add(1)
	kind := forgeries[int(n-1)%len(forgeries)]
	own, ok := f.ownToken()
	p := epoch.Partition(f.rng.Int32N(f.cfg.Partitions))
	var st epoch.SignedToken
	switch {
	case kind == ForgeInvented || !ok && kind != ForgeStrangerKey:
		kind = ForgeInvented
		st = epoch.SignedToken{Token: own.Token + 1000, Member: own.Member}
	case kind == ForgeOtherPartition:
		if p == own.partition {
			p = (p + 1) % epoch.Partition(f.cfg.Partitions)
		}
		st = own.SignedToken
	case kind == ForgeRaised:
		p, st = own.partition, own.SignedToken
		st.Token += 1000
	case kind == ForgeStrangerKey:
		st = f.stranger.Sign(epoch.Grant{Group: f.cfg.Group, TopicID: f.cfg.TopicID, Partition: p, Token: own.Token + 1000, Member: own.Member})
	case kind == ForgeOtherMember:
		p, st = own.partition, own.SignedToken
		st.Member = "mallory"
	case kind == ForgeTampered:
		p, st = own.partition, own.SignedToken
		sig := []byte(st.Sig)
		sig[f.rng.IntN(len(sig))] ^= 1 << f.rng.UintN(8)
		st.Sig = string(sig)
	}
	rec := Record{Partition: p, Seq: -n, Token: st.Token, Worker: f.cfg.Name, Member: st.Member}
	cctx := ctx
	if f.cfg.Attempts != nil {
		cctx = withCall(ctx, call{worker: f.cfg.Name, member: st.Member, forgery: kind})
	}
	cctx, cancel := context.WithTimeout(cctx, 2*time.Second)
	err := f.cfg.Resource.Append(cctx, rec, st)
	cancel()
	if err == nil {
		f.admitted.Add(1)
		f.cfg.Logger.Warn("a forged token was admitted", zap.String("forgery", kind), zap.Int32("partition", int32(p)),
			zap.Int64("token", int64(st.Token)), zap.Int64("seq", rec.Seq))
	}
}

// ownedToken is a claim's signed token and partition.
type ownedToken struct {
	epoch.SignedToken
	partition epoch.Partition
}

// ownToken returns the token of one of the worker's signed claims, at
// random, and reports whether there is one; without, a token of 0 (the
// forger invents from nothing).
func (f *Forger) ownToken() (ownedToken, bool) {
	var signed []ownedToken
	for _, c := range f.cfg.Claims() {
		if st := c.Token(); st.Signed() {
			signed = append(signed, ownedToken{st, epoch.Partition(c.Partition())})
		}
	}
	if len(signed) == 0 {
		return ownedToken{SignedToken: epoch.SignedToken{Member: "mallory"}}, false
	}
	return signed[f.rng.IntN(len(signed))], true
}
