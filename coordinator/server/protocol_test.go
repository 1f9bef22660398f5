package server

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestApiVersions(t *testing.T) {
	ts := startServer(t, nil)
	c := dial(t, ts.addr)

	for v := int16(0); v <= 3; v++ {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = v
		req.ClientSoftwareName, req.ClientSoftwareVersion = "kgo", "1.22.3"
		resp := c.roundTrip(req).(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("v%d: error %d", v, resp.ErrorCode)
		}
		type keyRange struct{ key, min, max int16 }
		var got, want []keyRange
		for _, k := range resp.ApiKeys {
			got = append(got, keyRange{k.ApiKey, k.MinVersion, k.MaxVersion})
		}
		for a := range served {
			want = append(want, keyRange{a.key, a.min, a.max})
		}
		if !slices.Equal(got, want) {
			t.Fatalf("v%d: keys %v, want %v", v, got, want)
		}
	}

	// kgo opens with ApiVersions v4 (v5 with newer kmsg): the answer is v0
	// with UNSUPPORTED_VERSION and key 18's range only, even with a body
	// this server could not parse.
	for _, v := range []int16{4, 5, 99} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = v
		corr := c.send(req)
		gotCorr, resp := c.recv()
		r := resp.(*kmsg.ApiVersionsResponse)
		if gotCorr != corr || r.ErrorCode != kerr.UnsupportedVersion.Code ||
			len(r.ApiKeys) != 1 || r.ApiKeys[0].ApiKey != 18 || r.ApiKeys[0].MaxVersion != 3 {
			t.Fatalf("v%d: corr %d/%d, %+v", v, gotCorr, corr, r)
		}
	}

	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "-bad", "1"
	if resp := c.roundTrip(req).(*kmsg.ApiVersionsResponse); resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("invalid software name: error %d", resp.ErrorCode)
	}
}

func TestMetadata(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.Advertise = "tenure.example:19092"; c.NodeID = 7 })
	c := dial(t, ts.addr)

	resp := c.roundTrip(metadataRequest(12, "jobs")).(*kmsg.MetadataResponse)
	if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 7 || resp.Brokers[0].Host != "tenure.example" || resp.Brokers[0].Port != 19092 {
		t.Fatalf("brokers %+v", resp.Brokers)
	}
	if resp.ControllerID != 7 || resp.ClusterID == nil || *resp.ClusterID != "tenure" {
		t.Fatalf("controller %d cluster %v", resp.ControllerID, resp.ClusterID)
	}
	if len(resp.Topics) != 1 {
		t.Fatalf("topics %+v", resp.Topics)
	}
	jobs := resp.Topics[0]
	if jobs.ErrorCode != 0 || *jobs.Topic != "jobs" || jobs.TopicID == ([16]byte{}) || len(jobs.Partitions) != 64 {
		t.Fatalf("jobs: error %d id %x partitions %d", jobs.ErrorCode, jobs.TopicID, len(jobs.Partitions))
	}
	for i, p := range jobs.Partitions {
		if p.Partition != int32(i) || p.Leader != 7 || p.ErrorCode != 0 || !slices.Equal(p.Replicas, []int32{7}) || !slices.Equal(p.ISR, []int32{7}) {
			t.Fatalf("partition %d: %+v", i, p)
		}
	}

	// The ID is stable, lookups by ID work, and a null list lists all.
	again := c.roundTrip(metadataRequest(12, "jobs")).(*kmsg.MetadataResponse)
	if again.Topics[0].TopicID != jobs.TopicID {
		t.Fatalf("topic ID changed: %x then %x", jobs.TopicID, again.Topics[0].TopicID)
	}
	byID := metadataRequest(12)
	rt := kmsg.NewMetadataRequestTopic()
	rt.TopicID = jobs.TopicID
	byID.Topics = append(byID.Topics, rt)
	if r := c.roundTrip(byID).(*kmsg.MetadataResponse); len(r.Topics) != 1 || *r.Topics[0].Topic != "jobs" {
		t.Fatalf("by ID: %+v", r.Topics)
	}
	rt.TopicID = [16]byte{1}
	byID.Topics = []kmsg.MetadataRequestTopic{rt}
	if r := c.roundTrip(byID).(*kmsg.MetadataResponse); len(r.Topics) != 1 || r.Topics[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("unknown ID: %+v", r.Topics)
	}
	c.roundTrip(metadataRequest(12, "alpha"))
	all := metadataRequest(12)
	all.Topics = nil
	r := c.roundTrip(all).(*kmsg.MetadataResponse)
	var names []string
	for _, t := range r.Topics {
		names = append(names, *t.Topic)
	}
	if !slices.Equal(names, []string{"alpha", "jobs"}) {
		t.Fatalf("all topics: %v", names)
	}

	// No auto-creation when the request does not allow it; an invalid
	// name is refused; v0 auto-creates implicitly.
	noAuto := metadataRequest(12, "other")
	noAuto.AllowAutoTopicCreation = false
	if r := c.roundTrip(noAuto).(*kmsg.MetadataResponse); r.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("no auto-create: error %d", r.Topics[0].ErrorCode)
	}
	if r := c.roundTrip(metadataRequest(12, "bad/name")).(*kmsg.MetadataResponse); r.Topics[0].ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("bad name: error %d", r.Topics[0].ErrorCode)
	}
	if r := c.roundTrip(metadataRequest(0, "old")).(*kmsg.MetadataResponse); r.Topics[0].ErrorCode != 0 || len(r.Topics[0].Partitions) != 64 {
		t.Fatalf("v0 auto-create: %+v", r.Topics[0])
	}
}

func TestMetadataAutoCreateOff(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.AutoCreateTopics = false })
	c := dial(t, ts.addr)
	if r := c.roundTrip(metadataRequest(12, "jobs")).(*kmsg.MetadataResponse); r.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("error %d, want UNKNOWN_TOPIC_OR_PARTITION", r.Topics[0].ErrorCode)
	}
	if ts.topics.Len() != 0 {
		t.Fatalf("%d topics exist", ts.topics.Len())
	}
}

func TestFindCoordinator(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.Advertise = "coord:9999" })
	c := dial(t, ts.addr)

	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version = 3
	req.CoordinatorKey = "g"
	r := c.roundTrip(req).(*kmsg.FindCoordinatorResponse)
	if r.ErrorCode != 0 || r.NodeID != 0 || r.Host != "coord" || r.Port != 9999 {
		t.Fatalf("v3: %+v", r)
	}

	req = kmsg.NewPtrFindCoordinatorRequest()
	req.Version = 4
	req.CoordinatorKeys = []string{"a", "b"}
	r = c.roundTrip(req).(*kmsg.FindCoordinatorResponse)
	if len(r.Coordinators) != 2 || r.Coordinators[0].Key != "a" || r.Coordinators[1].Key != "b" ||
		r.Coordinators[1].Host != "coord" || r.Coordinators[1].Port != 9999 {
		t.Fatalf("v4: %+v", r.Coordinators)
	}

	req.CoordinatorType = 1
	r = c.roundTrip(req).(*kmsg.FindCoordinatorResponse)
	if r.Coordinators[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("transaction coordinator: %+v", r.Coordinators[0])
	}
}

func TestListOffsets(t *testing.T) {
	ts := startServer(t, nil)
	c := dial(t, ts.addr)
	c.roundTrip(metadataRequest(12, "jobs"))

	for _, v := range []int16{0, 1, 4, 7} {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = v
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "jobs"
		for _, p := range []int32{0, 63, 64} {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition = p
			rp.Timestamp = -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		r := c.roundTrip(req).(*kmsg.ListOffsetsResponse)
		ps := r.Topics[0].Partitions
		for _, p := range ps[:2] {
			if p.ErrorCode != 0 || (v > 0 && p.Offset != 0) || (v == 0 && !slices.Equal(p.OldStyleOffsets, []int64{0})) {
				t.Fatalf("v%d partition %d: %+v", v, p.Partition, p)
			}
			if v >= 4 && p.LeaderEpoch != -1 {
				t.Fatalf("v%d leader epoch %d", v, p.LeaderEpoch)
			}
		}
		if ps[2].ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("v%d partition 64: error %d", v, ps[2].ErrorCode)
		}
	}
}

func TestCreateTopics(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxPartitions = 100; c.MaxTopics = 4 })
	c := dial(t, ts.addr)

	type topicReq struct {
		name       string
		partitions int32
		rf         int16
	}
	create := func(version int16, validateOnly bool, topics ...topicReq) []kmsg.CreateTopicsResponseTopic {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version = version
		req.ValidateOnly = validateOnly
		for _, tr := range topics {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = tr.name, tr.partitions, tr.rf
			req.Topics = append(req.Topics, rt)
		}
		return c.roundTrip(req).(*kmsg.CreateTopicsResponse).Topics
	}

	got := create(7, false,
		topicReq{"a", 8, 1},
		topicReq{"b", -1, -1},
		topicReq{"c", 101, 1},
		topicReq{"d", 0, 1},
		topicReq{"e", 4, 0},
		topicReq{"dup", 4, 1},
		topicReq{"dup", 4, 1},
		topicReq{"in valid", 4, 1},
		topicReq{"f", 3, 3},
	)
	want := []struct {
		code       int16
		partitions int32
	}{
		{0, 8},
		{0, 64},
		{kerr.InvalidPartitions.Code, -1},
		{kerr.InvalidPartitions.Code, -1},
		{kerr.InvalidReplicationFactor.Code, -1},
		{kerr.InvalidRequest.Code, -1},
		{kerr.InvalidRequest.Code, -1},
		{kerr.InvalidTopicException.Code, -1},
		{0, 3},
	}
	for i, w := range want {
		if got[i].ErrorCode != w.code || got[i].NumPartitions != w.partitions {
			t.Errorf("topic %d (%s): error %d partitions %d, want %d %d", i, got[i].Topic, got[i].ErrorCode, got[i].NumPartitions, w.code, w.partitions)
		}
		if w.code == 0 && (got[i].TopicID == ([16]byte{}) || got[i].ReplicationFactor != 1) {
			t.Errorf("topic %d: id %x rf %d", i, got[i].TopicID, got[i].ReplicationFactor)
		}
		if w.code != 0 && got[i].ErrorMessage == nil {
			t.Errorf("topic %d: no error message", i)
		}
	}

	// Existing topics keep their partition count.
	if got := create(7, false, topicReq{"a", 16, 1}); got[0].ErrorCode != kerr.TopicAlreadyExists.Code {
		t.Fatalf("re-create: error %d", got[0].ErrorCode)
	}
	if _, n, _ := ts.topics.Lookup("a"); n != 8 {
		t.Fatalf("a has %d partitions after re-create", n)
	}
	// ValidateOnly creates nothing.
	if got := create(7, true, topicReq{"g", 5, 1}); got[0].ErrorCode != 0 || ts.topics.get("g") != nil {
		t.Fatalf("validate only: error %d, created %v", got[0].ErrorCode, ts.topics.get("g") != nil)
	}
	// a, b, f exist; one more fits, then the limit.
	got = create(7, false, topicReq{"h", 1, 1}, topicReq{"i", 1, 1})
	if got[0].ErrorCode != 0 || got[1].ErrorCode != kerr.PolicyViolation.Code {
		t.Fatalf("limit: errors %d %d", got[0].ErrorCode, got[1].ErrorCode)
	}
	if r := c.roundTrip(metadataRequest(12, "j")).(*kmsg.MetadataResponse); r.Topics[0].ErrorCode != kerr.PolicyViolation.Code {
		t.Fatalf("auto-create at the limit: error %d", r.Topics[0].ErrorCode)
	}
	if n := ts.metric(t, "tenure_limit_rejections_total", "limit", "topics"); n != 2 {
		t.Fatalf("topic limit rejections %v, want 2", n)
	}
	if n := ts.metric(t, "tenure_topics"); n != 4 {
		t.Fatalf("tenure_topics %v, want 4", n)
	}
}

func TestFetchHeldAndInOrder(t *testing.T) {
	ts := startServer(t, nil)
	c := dial(t, ts.addr)
	c.roundTrip(metadataRequest(12, "jobs"))

	// A Fetch held for 300ms, then an ApiVersions on the same connection:
	// the ApiVersions answer waits for the Fetch's.
	const wait = 300 * time.Millisecond
	start := time.Now()
	fetchCorr := c.send(fetchRequest(12, wait, "jobs", 0, 1))
	apiReq := kmsg.NewPtrApiVersionsRequest()
	apiReq.Version = 3
	apiReq.ClientSoftwareName, apiReq.ClientSoftwareVersion = "t", "1"
	apiCorr := c.send(apiReq)

	// Meanwhile another connection is answered at once.
	other := dial(t, ts.addr)
	otherStart := time.Now()
	other.roundTrip(kmsg.NewPtrApiVersionsRequest())
	if d := time.Since(otherStart); d > wait/2 {
		t.Fatalf("another connection waited %v behind a held Fetch", d)
	}

	corr, resp := c.recv()
	if corr != fetchCorr {
		t.Fatalf("first response is %d, want the Fetch's %d", corr, fetchCorr)
	}
	if d := time.Since(start); d < wait-10*time.Millisecond {
		t.Fatalf("Fetch answered after %v, want it held %v", d, wait)
	}
	fr := resp.(*kmsg.FetchResponse)
	if fr.ErrorCode != 0 || fr.SessionID != 0 || len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 2 {
		t.Fatalf("fetch response %+v", fr)
	}
	for _, p := range fr.Topics[0].Partitions {
		if p.ErrorCode != 0 || p.HighWatermark != 0 || p.LastStableOffset != 0 || p.LogStartOffset != 0 || len(p.RecordBatches) != 0 {
			t.Fatalf("partition %+v", p)
		}
	}
	// The record set is empty, not null, at every version: librdkafka
	// and kafka-python cannot parse a null one.
	for _, v := range []int16{0, 4, 12} {
		fr := other.roundTrip(fetchRequest(v, 0, "jobs", 0)).(*kmsg.FetchResponse)
		if p := fr.Topics[0].Partitions[0]; p.RecordBatches == nil {
			t.Fatalf("v%d fetch: null record set", v)
		}
	}
	if corr, _ := c.recv(); corr != apiCorr {
		t.Fatalf("second response is %d, want ApiVersions' %d", corr, apiCorr)
	}

	// Unknown partitions are answered at once with an error.
	start = time.Now()
	fr = c.roundTrip(fetchRequest(12, 5*time.Second, "jobs", 64)).(*kmsg.FetchResponse)
	if fr.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code || time.Since(start) > 2*time.Second {
		t.Fatalf("unknown partition: %+v after %v", fr.Topics[0].Partitions[0], time.Since(start))
	}
	// MaxWait 0 is answered at once.
	fr = c.roundTrip(fetchRequest(4, 0, "jobs", 3)).(*kmsg.FetchResponse)
	if fr.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("v4 fetch: %+v", fr.Topics[0].Partitions[0])
	}
}

// TestFetchByTopicID: from v13 a Fetch names topics by ID, as
// @platformatic/kafka always does; an unknown ID is UNKNOWN_TOPIC_ID.
func TestFetchByTopicID(t *testing.T) {
	ts := startServer(t, nil)
	c := dial(t, ts.addr)
	md := c.roundTrip(metadataRequest(12, "jobs")).(*kmsg.MetadataResponse)
	id := md.Topics[0].TopicID
	for _, v := range []int16{13, 16} {
		req := fetchRequest(v, 0, "", 0, 1)
		req.Topics[0].TopicID = id
		fr := c.roundTrip(req).(*kmsg.FetchResponse)
		if fr.ErrorCode != 0 || len(fr.Topics) != 1 || fr.Topics[0].TopicID != id || len(fr.Topics[0].Partitions) != 2 {
			t.Fatalf("v%d fetch: %+v", v, fr)
		}
		for _, p := range fr.Topics[0].Partitions {
			if p.ErrorCode != 0 || p.RecordBatches == nil {
				t.Fatalf("v%d partition %+v", v, p)
			}
		}
		req = fetchRequest(v, 0, "", 0)
		req.Topics[0].TopicID = [16]byte{1}
		fr = c.roundTrip(req).(*kmsg.FetchResponse)
		if code := fr.Topics[0].Partitions[0].ErrorCode; code != kerr.UnknownTopicID.Code {
			t.Fatalf("v%d fetch of an unknown ID: error %d", v, code)
		}
	}
}

func TestFetchCappedByMaxFetchWait(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxFetchWait = 50 * time.Millisecond })
	c := dial(t, ts.addr)
	c.roundTrip(metadataRequest(12, "jobs"))
	start := time.Now()
	c.roundTrip(fetchRequest(12, time.Minute, "jobs", 0))
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("fetch held %v despite a 50ms cap", d)
	}
}

func TestPipelinedFetchesBeyondMaxInFlight(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxInFlight = 2 })
	c := dial(t, ts.addr)
	c.roundTrip(metadataRequest(12, "jobs"))
	var corrs []int32
	for range 6 {
		corrs = append(corrs, c.send(fetchRequest(12, 20*time.Millisecond, "jobs", 0)))
	}
	for _, want := range corrs {
		if corr, _ := c.recv(); corr != want {
			t.Fatalf("got response %d, want %d", corr, want)
		}
	}
}

func TestShutdownAnswersParkedFetch(t *testing.T) {
	ts := startServer(t, nil)
	c := dial(t, ts.addr)
	c.roundTrip(metadataRequest(12, "jobs"))
	corr := c.send(fetchRequest(12, 20*time.Second, "jobs", 0))
	// Parked, the Fetch is the shutdown's to answer; read after the
	// shutdown began, it went unanswered.
	eventually(t, 10*time.Second, "the server to park the Fetch", func() bool { return parkedFetches(ts) == 1 })
	start := time.Now()
	go ts.stop()
	got, resp := c.recv()
	if got != corr || time.Since(start) > 5*time.Second {
		t.Fatalf("got %d after %v", got, time.Since(start))
	}
	if fr := resp.(*kmsg.FetchResponse); fr.ErrorCode != 0 || fr.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("shutdown fetch answer %+v", fr)
	}
	c.expectClosed(5 * time.Second)
}

func TestTopicRegistryConcurrent(t *testing.T) {
	r := newTopicRegistry(1000, 100)
	done := make(chan struct{})
	for w := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 50 {
				name := "t" + strconv.Itoa(i%20)
				t2, err := r.create(name, int32(1+w), func(t *topic) (*topic, error) { return t, nil })
				if err != nil && err != errTopicExists {
					t.Error(err)
					return
				}
				id, n, ok := r.Lookup(name)
				if !ok || id != t2.id || n != t2.partitions {
					t.Errorf("lookup %s: %x %d %v", name, id, n, ok)
				}
				if got, ok := r.Name(id); !ok || got != name {
					t.Errorf("name of %x: %q", id, got)
				}
			}
		}()
	}
	for range 4 {
		<-done
	}
	if r.Len() != 20 {
		t.Fatalf("%d topics, want 20", r.Len())
	}
}
