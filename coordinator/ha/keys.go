package ha

import (
	"net/url"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// keys names the package's keys under <prefix>meta/ha/ (see the package
// doc).
type keys struct{ dir, shardCount string }

func newKeys(prefix string) keys {
	return keys{dir: prefix + "meta/ha/", shardCount: prefix + "meta/shards"}
}

func (k keys) shardsDir() string { return k.dir + "shards/" }

// shard is the owner key of shard s: the owner's node ID, bound to its
// lease.
func (k keys) shard(s int) string { return k.shardsDir() + strconv.Itoa(s) }

// shardOf parses the shard out of a shards/ key.
func (k keys) shardOf(key string) (int, bool) {
	rest, ok := strings.CutPrefix(key, k.shardsDir())
	if !ok {
		return 0, false
	}
	s, err := strconv.Atoi(rest)
	if err != nil || s < 0 || strconv.Itoa(s) != rest {
		return 0, false
	}
	return s, true
}

func (k keys) nodesDir() string { return k.dir + "nodes/" }
func (k keys) addrsDir() string { return k.dir + "addrs/" }

// addr is the permanent key recording the node ID an address last had.
func (k keys) addr(addr string) string { return k.addrsDir() + url.PathEscape(addr) }
func (k keys) leaderDir() string       { return k.dir + "leader/" }

func (k keys) node(id int32) string { return k.nodesDir() + strconv.FormatInt(int64(id), 10) }

// leader is a candidate's key: concurrency.Election's layout, so that
// etcd's own tools read the election.
func (k keys) leader(id clientv3.LeaseID) string {
	return k.leaderDir() + strconv.FormatInt(int64(id), 16)
}

// nodeID parses the ID out of a nodes/ key.
func (k keys) nodeID(key string) (int32, bool) {
	rest, ok := strings.CutPrefix(key, k.nodesDir())
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(rest, 10, 32)
	if err != nil || id < 0 || strconv.FormatInt(id, 10) != rest {
		return 0, false
	}
	return int32(id), true
}

func (k keys) isLeader(key string) bool { return strings.HasPrefix(key, k.leaderDir()) }
