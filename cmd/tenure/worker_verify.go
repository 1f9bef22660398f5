package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/coordinator/adminapi"
	"github.com/tenure-dev/tenure/epoch"
	"github.com/tenure-dev/tenure/internal/workload"
	"github.com/tenure-dev/tenure/member"
)

// A worker started with --verify-keys checks every token before its
// resources write it: the coordinator's signing keys come from the admin
// API of any node named (the first that answers), the topic's ID from
// Metadata, and the resources refuse what does not verify (unsigned
// tokens included). The keys are fetched again every --verify-keys-refresh,
// and at once (at most once a second) when a claim's own token is refused
// as unverified: the coordinator rotated and signs with a key the worker
// has not seen yet.

// keyFetcher keeps a verifier's keys current.
type keyFetcher struct {
	urls []string
	v    *epoch.Verifier
	log  *zap.Logger
	kick chan struct{}
}

// startVerifier builds the verifier of --verify-keys for the topic of ID
// id: it fetches the keys, retrying until it succeeds or ctx ends, then
// keeps them current until ctx ends.
func startVerifier(ctx context.Context, o *workerOptions, id [16]byte, log *zap.Logger) (*keyFetcher, error) {
	k := &keyFetcher{urls: splitList(o.verifyKeys), log: log, kick: make(chan struct{}, 1)}
	k.v = epoch.NewVerifier(epoch.VerifierConfig{Group: o.group, TopicID: id, RequireSigned: true})
	if _, err := retry(ctx, log, "fetching the signing keys", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, k.fetch(ctx)
	}); err != nil {
		return nil, err
	}
	go k.run(ctx, o.verifyRefresh)
	return k, nil
}

// retry calls f until it succeeds or ctx ends, warning every failure.
func retry[T any](ctx context.Context, log *zap.Logger, what string, f func(context.Context) (T, error)) (T, error) {
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		v, err := f(cctx)
		cancel()
		if err == nil {
			return v, nil
		}
		log.Warn(what+" failed; retrying", zap.Error(err))
		select {
		case <-ctx.Done():
			return v, fmt.Errorf("%s: %w", what, context.Cause(ctx))
		case <-time.After(time.Second):
		}
	}
}

// fetch loads the keys from the first node that answers.
func (k *keyFetcher) fetch(ctx context.Context) error {
	var errs []error
	for _, u := range k.urls {
		ks, err := (&adminapi.Client{Base: u}).Keys(ctx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		prev, _ := k.v.Keys().Active()
		k.v.SetKeys(ks)
		if cur, _ := ks.Active(); cur.ID != prev.ID {
			k.log.Info("verifying tokens with the coordinator's keys", zap.String("active", string(cur.ID)), zap.Int("keys", len(ks.Keys())), zap.String("from", u))
		}
		return nil
	}
	return errors.Join(errs...)
}

// run fetches the keys every refresh, and when kicked.
func (k *keyFetcher) run(ctx context.Context, refresh time.Duration) {
	t := time.NewTicker(refresh)
	defer t.Stop()
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-k.kick:
			if time.Since(last) < time.Second {
				continue
			}
		}
		last = time.Now()
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := k.fetch(cctx); err != nil && ctx.Err() == nil {
			k.log.Warn("the signing keys could not be fetched; verifying with the ones held", zap.Error(err))
		}
		cancel()
	}
}

// refused is the worker's hook for a claim's token refused as unverified.
func (k *keyFetcher) refused(error) {
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

// topicInfo is what Metadata says of a topic.
type topicInfo struct {
	id         [16]byte
	partitions int32
}

// lookupTopic returns topic's ID and partition count from Metadata,
// creating the topic if the cluster does on request (tenure does).
func lookupTopic(ctx context.Context, kopts []kgo.Opt, topic string) (topicInfo, error) {
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		return topicInfo{}, err
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = true
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return topicInfo{}, err
	}
	for _, t := range resp.Topics {
		if t.Topic != nil && *t.Topic == topic {
			if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
				return topicInfo{}, fmt.Errorf("topic %s: %w", topic, err)
			}
			if t.TopicID == ([16]byte{}) || len(t.Partitions) == 0 {
				return topicInfo{}, fmt.Errorf("topic %s has no ID or no partitions (Metadata v%d)", topic, req.Version)
			}
			return topicInfo{id: t.TopicID, partitions: int32(len(t.Partitions))}, nil
		}
	}
	return topicInfo{}, fmt.Errorf("topic %s is not in the Metadata answer", topic)
}

// verifier returns the fetcher's verifier; nil (no verification) for a
// nil fetcher.
func (k *keyFetcher) verifier() *epoch.Verifier {
	if k == nil {
		return nil
	}
	return k.v
}

// refusedHook returns the worker's Unverified hook; nil for a nil
// fetcher.
func (k *keyFetcher) refusedHook() func(error) {
	if k == nil {
		return nil
	}
	return k.refused
}

// newForger returns the forger of --forge-every, aiming at the topic's
// partitions with the worker's claims.
func newForger(o *workerOptions, res workload.Resource, s *member.Session, topic topicInfo, name string, attempts *workload.AttemptLog, log *zap.Logger) (*workload.Forger, error) {
	return workload.NewForger(workload.ForgerConfig{
		Resource: res, Name: name, Group: o.group, TopicID: topic.id, Partitions: topic.partitions,
		Every: o.forgeEvery, Claims: s.Claims, Attempts: attempts, Logger: log,
	})
}
