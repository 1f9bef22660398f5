package embedetcd

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tenure-dev/tenure/internal/testenv"
)

// StopServer stops the server and leaves its client open, as when the
// member fails inside a running process: the client must go on through
// the other members.
func (m *Etcd) StopServer() { m.stop() }

func TestReachableEndpoints(t *testing.T) {
	member := func(id uint64, name, peer string, clients ...string) *pb.Member {
		return &pb.Member{ID: id, Name: name, PeerURLs: []string{peer}, ClientURLs: clients}
	}
	for _, tc := range []struct {
		name     string
		members  []*pb.Member
		want     []string
		complete bool
	}{
		{
			name: "all on loopback: one host, every member",
			members: []*pb.Member{
				member(1, "n1", "http://127.0.0.1:2380", "http://127.0.0.1:40001"),
				member(2, "n2", "http://127.0.0.1:2381", "http://127.0.0.1:40002"),
				member(3, "n3", "http://localhost:2382", "http://localhost:40003"),
			},
			want:     []string{"http://127.0.0.1:40001", "http://127.0.0.1:40002", "http://localhost:40003"},
			complete: true,
		},
		{
			name: "three hosts with loopback clients: only our own",
			members: []*pb.Member{
				member(1, "n1", "http://10.0.0.1:2380", "http://127.0.0.1:40001"),
				member(2, "n2", "http://10.0.0.2:2380", "http://127.0.0.1:40002"),
				member(3, "n3", "http://10.0.0.3:2380", "http://127.0.0.1:40003"),
			},
			want:     []string{"http://127.0.0.1:40001"},
			complete: true,
		},
		{
			name: "three hosts with reachable clients",
			members: []*pb.Member{
				member(1, "n1", "http://10.0.0.1:2380", "http://10.0.0.1:2379"),
				member(2, "n2", "http://10.0.0.2:2380", "http://10.0.0.2:2379"),
				member(3, "n3", "http://10.0.0.3:2380", "http://127.0.0.1:40003"),
			},
			want:     []string{"http://10.0.0.1:2379", "http://10.0.0.2:2379"},
			complete: true,
		},
		{
			name: "a member not started yet, a learner",
			members: []*pb.Member{
				member(1, "n1", "http://127.0.0.1:2380", "http://127.0.0.1:40001"),
				member(2, "", "http://127.0.0.1:2381"),
				{ID: 3, Name: "n3", PeerURLs: []string{"http://127.0.0.1:2382"}, ClientURLs: []string{"http://127.0.0.1:40003"}, IsLearner: true},
			},
			want:     []string{"http://127.0.0.1:40001"},
			complete: false,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, complete := reachableEndpoints(tc.members, 1)
			if !slices.Equal(got, tc.want) || complete != tc.complete {
				t.Errorf("got %q complete=%v, want %q complete=%v", got, complete, tc.want, tc.complete)
			}
		})
	}
}

// TestEmbeddedBadOptions checks that every mistake is refused before
// anything is started or created.
func TestEmbeddedBadOptions(t *testing.T) {
	const three = "n1=http://127.0.0.1:2380,n2=http://127.0.0.1:2381,n3=http://127.0.0.1:2382"
	for _, tc := range []struct {
		name string
		opts []Opt
		want string
	}{
		{"name not in the cluster", []Opt{MemberName("n4"), InitialCluster(three)}, `member name "n4" is not in the initial cluster (members: n1, n2, n3)`},
		{"default name not in the cluster", []Opt{InitialCluster(three)}, `member name "tenure" is not in the initial cluster`},
		{"no equals sign", []Opt{MemberName("n1"), InitialCluster("n1=http://127.0.0.1:2380,n2")}, `entry "n2" is not name=http://host:port`},
		{"no port", []Opt{MemberName("n1"), InitialCluster("n1=http://127.0.0.1")}, "needs a port"},
		{"https", []Opt{MemberName("n1"), InitialCluster("n1=https://127.0.0.1:2380")}, "https needs peer TLS"},
		{"not a URL", []Opt{MemberName("n1"), InitialCluster("n1=127.0.0.1:2380")}, "is not http://host:port"},
		{"a path", []Opt{MemberName("n1"), InitialCluster("n1=http://127.0.0.1:2380/x")}, "is not http://host:port"},
		{"unspecified host", []Opt{MemberName("n1"), InitialCluster("n1=http://0.0.0.0:2380")}, "not an address the others can reach"},
		{"member twice", []Opt{MemberName("n1"), InitialCluster("n1=http://127.0.0.1:2380,n1=http://127.0.0.1:2381")}, "n1 is listed twice"},
		{"shared peer URL", []Opt{MemberName("n1"), InitialCluster("n1=http://127.0.0.1:2380,n2=http://127.0.0.1:2380")}, "same peer URL"},
		{"bad state", []Opt{MemberName("n1"), InitialCluster(three), InitialClusterState("old")}, "neither new nor existing"},
		{"peer listen alone", []Opt{PeerListen("127.0.0.1:2380")}, "needs an initial cluster"},
		{"token alone", []Opt{InitialClusterToken("x")}, "needs an initial cluster"},
		{"peer listen on a name", []Opt{MemberName("n1"), InitialCluster(three), PeerListen("host.example:2380")}, "must be an IP address or localhost"},
		{"peer listen on port 0", []Opt{MemberName("n1"), InitialCluster(three), PeerListen("127.0.0.1:0")}, "bad port"},
		{"client listen without host", []Opt{ClientListen(":2379")}, "needs a host"},
		{"empty name", []Opt{MemberName("")}, "must be non-empty"},
		{"no retention", []Opt{CompactionRetention(0)}, "must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			_, err := Start(testenv.Context(t), dir, zap.NewNop(), tc.opts...)
			if !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrInvalidOption saying %q", err, tc.want)
			}
			if _, err := os.Stat(dir); err == nil {
				t.Errorf("the data dir was created")
			}
		})
	}
}

// TestQuietCoreCluster checks what a member of a cluster keeps quiet: the
// storage version it cannot record before its first term, and the
// warnings of its own shutdown.
func TestQuietCoreCluster(t *testing.T) {
	obs, logs := observer.New(zapcore.DebugLevel)
	closing := new(atomic.Bool)
	log := zap.New(&quietCore{Core: obs, closing: closing})
	early := errors.New("cannot detect storage schema version: missing term information")
	log.Warn("Failed to detect schema version", zap.Error(errors.New("missing term information")))
	log.Error("failed to update storage version", zap.String("cluster-version", "3.7.0"), zap.Error(early))
	log.Error("failed to update storage version", zap.Error(errors.New("disk full")))
	log.Warn("lost TCP streaming connection with remote peer")
	closing.Store(true)
	log.Warn("lost TCP streaming connection with remote peer")
	log.Error("failed to save raft snapshot")
	var got []string
	for _, e := range logs.All() {
		got = append(got, e.Message)
	}
	want := []string{"failed to update storage version", "lost TCP streaming connection with remote peer", "failed to save raft snapshot"}
	if !slices.Equal(got, want) {
		t.Fatalf("passed %q, want %q", got, want)
	}
}

// TestQuietCore: etcd's noise is dropped, its long strings cut, its
// warnings passed on.
func TestQuietCore(t *testing.T) {
	obs, logs := observer.New(zapcore.DebugLevel)
	closing := new(atomic.Bool)
	log := zap.New(&quietCore{Core: obs, closing: closing}).With(zap.String("component", "etcd"))
	log.Info("chatter")
	log.Warn("Running http and grpc server on single port. This is not recommended for production.")
	log.Warn("apply request took too long", zap.String("request", strings.Repeat("x", 5000)), zap.Int("n", 1))
	log.Error("setting up serving from embedded etcd failed.", zap.Error(errors.New("mux: server closed")))
	closing.Store(true)
	log.Error("setting up serving from embedded etcd failed.", zap.Error(errors.New("mux: server closed")))
	var got []string
	for _, e := range logs.All() {
		got = append(got, e.Message)
	}
	if want := []string{"apply request took too long", "setting up serving from embedded etcd failed."}; !slices.Equal(got, want) {
		t.Fatalf("passed %q, want %q", got, want)
	}
	req := logs.All()[0].ContextMap()["request"].(string)
	if len(req) > maxLogString+32 || !strings.HasSuffix(req, "(5000 bytes)") {
		t.Fatalf("a long string passed as %d bytes: ...%s", len(req), req[len(req)-20:])
	}
}
