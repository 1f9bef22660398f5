package member

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tenure-dev/tenure/internal/testenv"
)

// TestJoinWaitsForTopic: on a coordinator that creates no topic on
// Metadata, a member subscribed to a topic that does not exist says so in
// its log and waits; once the topic is created it joins and claims its
// partitions. Before, it joined at once and owned nothing, silently.
func TestJoinWaitsForTopic(t *testing.T) {
	cfg := testenv.TenureConfig(t, testSession, testInterval, testParts)
	cfg.AutoCreateTopics = false
	brokers := []string{testenv.StartTenure(t, cfg)}

	core, logs := observer.New(zapcore.InfoLevel)
	mcfg := testConfig(t, brokers)
	mcfg.Topics = []string{"later"}
	mcfg.Logger = zap.New(core)
	idle := func(c *Claim) { <-c.Context().Done() }
	joined := make(chan *Session, 1)
	failed := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go func() {
		s, err := Join(ctx, mcfg, idle)
		if err != nil {
			failed <- err
			return
		}
		joined <- s
	}()

	waitFor(t, 10*time.Second, func() string {
		for _, e := range logs.FilterMessageSnippet("does not exist").All() {
			if strings.Contains(e.ContextMap()["error"].(string), `topic "later" does not exist`) {
				return ""
			}
		}
		return "no log line says that topic later does not exist"
	})
	select {
	case s := <-joined:
		s.Close(context.Background())
		t.Fatal("joined before the topic exists")
	case err := <-failed:
		t.Fatalf("join failed: %v", err)
	default:
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 4, -1, nil, "later"); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-joined:
		t.Cleanup(func() {
			cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer ccancel()
			s.Close(cctx)
		})
		waitFor(t, 10*time.Second, func() string {
			if n := len(s.Claims()); n != 4 {
				return fmt.Sprintf("%d claims, want 4", n)
			}
			return ""
		})
	case err := <-failed:
		t.Fatalf("join failed after the topic was created: %v", err)
	}
}

// TestJoinInvalidTopic: a subscription to a name that cannot be a topic
// fails the join at once, saying so.
func TestJoinInvalidTopic(t *testing.T) {
	brokers := startTenure(t)
	mcfg := testConfig(t, brokers)
	mcfg.Topics = []string{"work:64"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := Join(ctx, mcfg, func(c *Claim) { <-c.Context().Done() })
	if err == nil {
		s.Close(context.Background())
		t.Fatal("joined topic work:64")
	}
	if !strings.Contains(err.Error(), `"work:64" is not a valid topic name`) || ctx.Err() != nil {
		t.Fatalf("join: %v; want a prompt error naming the invalid topic", err)
	}
}
