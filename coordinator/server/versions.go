package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// versionRange is the versions of one API key the server serves.
type versionRange struct {
	key, min, max int16
}

// advertised lists every API the server speaks, sorted by key; ApiVersions
// returns exactly this. Each range was checked against what a stock kgo
// v1.22 consumer group and kadm need (see KAFKA-NOTES.md); a request for
// any other key or version closes its connection, as Kafka does, except
// ApiVersions itself, which is answered at v0 with UNSUPPORTED_VERSION so
// the client can step down (KIP-511).
var advertised = []versionRange{
	{1, 0, 12}, // Fetch: held for MaxWait, always empty
	{2, 0, 7},  // ListOffsets: every offset is 0
	{3, 0, 12}, // Metadata: v10+ carries the topic IDs KIP-848 needs
	{8, 0, 9},  // OffsetCommit: consumer-protocol groups need v9
	{9, 0, 9},  // OffsetFetch: batched groups from v8
	{10, 0, 4}, // FindCoordinator: batched keys from v4
	{11, 0, 9}, // JoinGroup
	{12, 0, 4}, // Heartbeat
	{13, 0, 5}, // LeaveGroup
	{14, 0, 5}, // SyncGroup
	{15, 0, 5}, // DescribeGroups
	{16, 0, 5}, // ListGroups: state filter v4, type filter v5
	{18, 0, 3}, // ApiVersions
	{19, 0, 7}, // CreateTopics
	{42, 0, 2}, // DeleteGroups
	{47, 0, 0}, // OffsetDelete
	{68, 0, 1}, // ConsumerGroupHeartbeat (KIP-848)
	{69, 0, 1}, // ConsumerGroupDescribe (KIP-848)
}

// maxKey bounds the key-indexed tables.
const maxKey = 127

// versionTable is advertised indexed by key; a zero entry (max < 0) is an
// API the server does not serve.
var versionTable = func() (t [maxKey + 1]versionRange) {
	for i := range t {
		t[i] = versionRange{key: int16(i), min: -1, max: -1}
	}
	for _, v := range advertised {
		if kmsg.RequestForKey(v.key) == nil || v.max > kmsg.RequestForKey(v.key).MaxVersion() {
			panic("server: advertised version table names an API kmsg cannot decode")
		}
		t[v.key] = v
	}
	return t
}()

// supported reports whether the server serves version of key.
func supported(key, version int16) bool {
	if key < 0 || int(key) > maxKey {
		return false
	}
	v := versionTable[key]
	return v.max >= 0 && version >= v.min && version <= v.max
}

// apiVersionsKeys is the ApiVersions response's key list, shared read-only
// by every response.
var apiVersionsKeys = func() []kmsg.ApiVersionsResponseApiKey {
	keys := make([]kmsg.ApiVersionsResponseApiKey, 0, len(advertised))
	for _, v := range advertised {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = v.key, v.min, v.max
		keys = append(keys, k)
	}
	return keys
}()
