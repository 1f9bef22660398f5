package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/tenure-dev/tenure/coordinator/server"
	"github.com/tenure-dev/tenure/coordinator/web"
	"github.com/tenure-dev/tenure/internal/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// KIP-848 timing of the test coordinator: quick enough for members to
// settle in a second or two.
const (
	testHeartbeat = 200 * time.Millisecond
	testSession   = 3 * time.Second
)

// startTenure runs a coordinator in-process on a loopback port with
// topics of partitions partitions created on first use, and returns it
// with its address; it stops when t ends.
func startTenure(t testing.TB, partitions int32) (*server.Server, string) {
	t.Helper()
	return testenv.StartTenureServer(t, testenv.TenureConfig(t, testSession, testHeartbeat, partitions))
}

// startPage serves h on a loopback port until t ends.
func startPage(t testing.TB, h *web.Handler) *httptest.Server {
	t.Helper()
	hs := httptest.NewServer(h)
	t.Cleanup(func() {
		h.Close() // ends the event streams, which Close waits for
		hs.Close()
	})
	return hs
}

// kgoLogger logs a kgo client's warnings and errors to t.
func kgoLogger(t testing.TB) kgo.Opt {
	return kgo.WithLogger(kgo.BasicLogger(testWriter{t}, kgo.LogLevelWarn, nil))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// consumer starts a stock kgo consumer of topic in group over KIP-848;
// close it to leave the group.
func consumer(t testing.TB, addr, group, topic, clientID string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addr),
		kgo.ClientID(clientID),
		kgoLogger(t),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ServerSideBalancer(),
		kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(250*time.Millisecond),
	)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// createTopic creates topic with partitions partitions.
func createTopic(t testing.TB, addr, topic string, partitions int32) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgoLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// join makes member a KIP-848 member of group, subscribed to topic, by one
// raw heartbeat, and returns its epoch; leave takes it out.
func join(t testing.TB, cl *kgo.Client, group, member, topic string) int32 {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group = group
	req.MemberID = member
	req.RebalanceTimeoutMillis = 10000
	req.SubscribedTopicNames = []string{topic}
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	resp := heartbeat(t, cl, req)
	return resp.MemberEpoch
}

func leave(t testing.TB, cl *kgo.Client, group, member string) {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group = group
	req.MemberID = member
	req.MemberEpoch = -1
	heartbeat(t, cl, req)
}

func heartbeat(t testing.TB, cl *kgo.Client, req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err == nil && resp.ErrorCode != 0 {
		err = fmt.Errorf("error code %d", resp.ErrorCode)
	}
	if err != nil {
		t.Fatalf("heartbeat of %s in %q: %v", req.MemberID, req.Group, err)
	}
	return resp
}

// groupPath is the API path of group.
func groupPath(group string) string { return "/api/groups/" + url.PathEscape(group) }

// getJSON GETs path from hs and decodes its JSON body into out (unless
// nil), returning the response.
func getJSON(t testing.TB, hs *httptest.Server, path string, out any) *http.Response {
	t.Helper()
	resp, err := hs.Client().Get(hs.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("GET %s: Content-Type %q", path, ct)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("GET %s: Cache-Control %q", path, cc)
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("GET %s: %v in %s", path, err, body)
		}
	}
	return resp
}

// sse reads server-sent events.
type sse struct {
	body io.ReadCloser
	r    *bufio.Reader
}

// sseEvent is one event: its name and data.
type sseEvent struct {
	name, data string
}

func openEvents(t testing.TB, hs *httptest.Server, path string) (*http.Response, *sse) {
	t.Helper()
	resp, err := hs.Client().Get(hs.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp, &sse{body: resp.Body, r: bufio.NewReader(resp.Body)}
}

// next returns the next event, skipping comments and the retry field; err
// is the stream's end.
func (s *sse) next() (sseEvent, error) {
	var ev sseEvent
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return ev, err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if ev.name != "" || ev.data != "" {
				return ev, nil
			}
		case strings.HasPrefix(line, ":"), strings.HasPrefix(line, "retry: "):
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.data += strings.TrimPrefix(line, "data: ")
		default:
			return ev, fmt.Errorf("unexpected line %q", line)
		}
	}
}

func testLogger(t testing.TB) *zap.Logger { return zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)) }
