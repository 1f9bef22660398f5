package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tenure-dev/tenure/internal/proctest"
)

const (
	hbMembers = 1000
	// hbClients is the number of kgo clients (and so connections)
	// driving the load, and hbWorkers the requests each keeps in flight.
	hbClients = 4
	hbWorkers = 32
)

// BenchmarkHeartbeat1000 measures what one 1,000-member group's
// heartbeats cost four servers, each a child process on loopback, in
// one run so that their figures come from the same moment of the
// machine:
//
//   - tenure: `tenure serve` with the memory store;
//   - tenure-etcd: `tenure serve` on its default, the embedded etcd
//     (fsync on), in a temporary data directory: heartbeats that change
//     nothing write nothing, so this should cost what the memory store
//     costs;
//   - nologic: a server that only decodes requests and answers them with
//     canned successes (internal/nologic), the floor for a Go server on
//     kmsg;
//   - kfake: franz-go's fake Kafka (internal/kfakeserver).
//
// For each, 1,000 members are first set up with raw requests (classic:
// JoinGroup and SyncGroup with a leader's plan; KIP-848: a heartbeat at
// epoch 0, then heartbeats until the assignment settles; the no-logic
// server needs no setup). Then 4 kgo clients, 32 requests in flight each,
// send raw Heartbeat or ConsumerGroupHeartbeat requests through
// Client.Request as fast as they are answered, in windows of
// -tenure.window (default 1 s): that gives the rate and the server's own
// CPU per heartbeat, read from /proc/<pid>/stat. Then the same load is
// paced at half each server's rate, which gives the latency. The servers
// take turns, three windows each per phase, so that the machine's other
// load falls on all three alike. Reported per server:
//
//	<server>-hb/s        heartbeats answered per second at full load
//	<server>-cpu-us/hb   server CPU per heartbeat at full load
//	<server>-p99-ms      99th percentile round trip at half load
//
// and the ratios tenure/nologic and tenure/kfake of rate and CPU, and
// etcd/memory (tenure-etcd against tenure) of rate and CPU. All
// clients run in this process, on the same cores as the server: on a
// 2-core machine the rate is bounded by the clients (about 15 µs of
// client CPU per heartbeat), which is why CPU per heartbeat is the
// server's figure of merit. -tenure.profiledir writes each server's
// CPU profile.
func BenchmarkHeartbeat1000(b *testing.B) {
	bins := buildServers(b)
	// The load generator allocates for every request (kgo does); collect
	// less often so its pauses weigh less on the latencies measured.
	defer debug.SetGCPercent(debug.SetGCPercent(800))
	for _, proto := range []benchProtocol{benchClassic, benchConsumer} {
		b.Run(proto.String(), func(b *testing.B) {
			var full, half [len(hbServers)]hbLoad
			for range b.N {
				// All three servers are set up first; then their
				// windows alternate, so that a change in the
				// machine's load falls on all three alike.
				var targets [len(hbServers)]*hbTarget
				for i, srv := range hbServers {
					targets[i] = prepareHeartbeats(b, bins, srv, proto)
				}
				for range hbRounds {
					for i, t := range targets {
						full[i].add(t.drive(b, *benchWindow, 0))
					}
				}
				for range hbRounds {
					for i, t := range targets {
						half[i].add(t.drive(b, *benchWindow, full[i].rate()/2))
					}
				}
				for _, t := range targets {
					t.close()
				}
			}
			for i, srv := range hbServers {
				b.Logf("%s %s: full load %.0f hb/s, %.2f µs CPU/hb (%.2f user, %.2f system), %.2f reads/hb, %.2f writes/hb, p50 %v p99 %v; "+
					"half load %.0f hb/s, p50 %v p99 %v",
					srv, proto, full[i].rate(), us(full[i].cpuPerHB()), us(full[i].userPerHB()), us(full[i].cpuPerHB()-full[i].userPerHB()),
					float64(full[i].reads)/float64(full[i].sent), float64(full[i].writes)/float64(full[i].sent),
					full[i].pct(50), full[i].pct(99), half[i].rate(), half[i].pct(50), half[i].pct(99))
				b.ReportMetric(full[i].rate(), srv+"-hb/s")
				b.ReportMetric(us(full[i].cpuPerHB()), srv+"-cpu-us/hb")
				b.ReportMetric(float64(half[i].pct(99).Nanoseconds())/1e6, srv+"-p99-ms")
			}
			ratio := func(a, c float64) float64 {
				if c == 0 {
					return 0
				}
				return a / c
			}
			b.ReportMetric(ratio(full[0].rate(), full[1].rate()), "rate-tenure/nologic")
			b.ReportMetric(ratio(us(full[0].cpuPerHB()), us(full[1].cpuPerHB())), "cpu-tenure/nologic")
			b.ReportMetric(ratio(full[0].rate(), full[2].rate()), "rate-tenure/kfake")
			b.ReportMetric(ratio(us(full[0].cpuPerHB()), us(full[2].cpuPerHB())), "cpu-tenure/kfake")
			b.ReportMetric(ratio(full[3].rate(), full[0].rate()), "rate-etcd/memory")
			b.ReportMetric(ratio(us(full[3].cpuPerHB()), us(full[0].cpuPerHB())), "cpu-etcd/memory")
		})
	}
}

// hbServers are the servers compared, tenure first.
var hbServers = [...]string{"tenure", "nologic", "kfake", "tenure-etcd"}

// hbRounds is how many windows of each phase each server gets.
const hbRounds = 3

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }

// hbTarget is one server process with its members set up and its load
// clients connected.
type hbTarget struct {
	p       *serverProcess
	proto   benchProtocol
	clients []*kgo.Client
	members []benchMember
}

// prepareHeartbeats starts one server process, sets up the members and
// warms the load clients up.
func prepareHeartbeats(b *testing.B, bins serverBinaries, srv string, proto benchProtocol) *hbTarget {
	b.Helper()
	var profile []string
	if *benchProfileDir != "" {
		if err := os.MkdirAll(*benchProfileDir, 0o755); err != nil {
			b.Fatal(err)
		}
		profile = []string{"--cpuprofile", filepath.Join(*benchProfileDir, srv+"-"+proto.String()+".pprof")}
	}
	var p *serverProcess
	var loadAddr string // the load's address when it is not p's
	var loadOpts []kgo.Opt
	switch srv {
	case "tenure":
		timeouts := []string{"--consumer-session-timeout", benchSession.String(), "--consumer-heartbeat-interval", "5s"}
		if profile != nil {
			p = startProcess(b, srv, bins.tenureprof, append(append([]string{"--listen", "{addr}"}, timeouts...), profile...)...)
		} else {
			p = startProcess(b, srv, bins.tenure, append([]string{"serve", "--store", "memory", "--listen", "{addr}", "--log-level", "warn"}, timeouts...)...)
		}
	case "tenure-etcd":
		p = startProcess(b, srv, bins.tenure, "serve", "--data-dir", filepath.Join(b.TempDir(), "data"), "--listen", "{addr}",
			"--log-level", "warn", "--consumer-session-timeout", benchSession.String(), "--consumer-heartbeat-interval", "5s")
	case "tenure-tls":
		// Members are set up on the plaintext listener; the load goes
		// to the TLS one.
		var certFile, keyFile string
		var clientTLS *tls.Config
		certFile, keyFile, clientTLS = benchTLSFiles(b)
		tlsAddr, err := proctest.FreeAddr()
		if err != nil {
			b.Fatal(err)
		}
		p = startProcess(b, srv, bins.tenure, "serve", "--store", "memory", "--listeners", "PLAINTEXT://{addr},SSL://"+tlsAddr,
			"--tls-cert", certFile, "--tls-key", keyFile, "--log-level", "warn",
			"--consumer-session-timeout", benchSession.String(), "--consumer-heartbeat-interval", "5s")
		loadAddr, loadOpts = tlsAddr, []kgo.Opt{kgo.DialTLSConfig(clientTLS)}
	case "nologic":
		p = startProcess(b, srv, bins.nologic, append([]string{"--listen", "{addr}"}, profile...)...)
	case "kfake":
		p = startProcess(b, srv, bins.kfake, append([]string{"--listen", "{addr}", "--topic", benchTopic, "--partitions", "64",
			"--consumer-session-timeout", benchSession.String(), "--consumer-heartbeat-interval", "5s"}, profile...)...)
	}
	if loadAddr == "" {
		loadAddr = p.addr
	}
	t := &hbTarget{p: p, proto: proto, clients: newBenchClients(b, loadAddr, hbClients, loadOpts...)}
	if srv == "nologic" {
		t.members = make([]benchMember, hbMembers)
		for i := range t.members {
			t.members[i] = benchMember{id: newMemberID(), gen: 1}
		}
	} else {
		createBenchTopic(b, t.clients[0])
		start := time.Now()
		t.members = setupMembers(b, p.addr, proto, hbMembers)
		b.Logf("%s %s: %d members set up in %v", srv, proto, hbMembers, time.Since(start).Round(time.Millisecond))
	}
	// Warm up: connections to the coordinator, the runtime's pools.
	t.drive(b, 200*time.Millisecond, 0)
	return t
}

func (t *hbTarget) close() {
	for _, cl := range t.clients {
		cl.Close()
	}
	t.p.stop()
}

// hbLoad is the outcome of one load phase.
type hbLoad struct {
	sent    int
	elapsed time.Duration
	cpu     time.Duration
	user    time.Duration   // the user part of cpu
	lat     []time.Duration // sorted
	// reads and writes are the server's read and write system calls.
	reads, writes int64
}

// add merges another phase's outcome into l.
func (l *hbLoad) add(o hbLoad) {
	l.sent += o.sent
	l.elapsed += o.elapsed
	l.cpu += o.cpu
	l.user += o.user
	l.reads += o.reads
	l.writes += o.writes
	l.lat = append(l.lat, o.lat...)
	slices.Sort(l.lat)
}

func (l hbLoad) rate() float64 {
	if l.elapsed == 0 {
		return 0
	}
	return float64(l.sent) / l.elapsed.Seconds()
}

func (l hbLoad) userPerHB() time.Duration {
	if l.sent == 0 {
		return 0
	}
	return l.user / time.Duration(l.sent)
}

func (l hbLoad) cpuPerHB() time.Duration {
	if l.sent == 0 {
		return 0
	}
	return l.cpu / time.Duration(l.sent)
}

func (l hbLoad) pct(q int) time.Duration {
	if len(l.lat) == 0 {
		return 0
	}
	return l.lat[min(len(l.lat)-1, len(l.lat)*q/100)]
}

// drive sends heartbeats of the members, round robin, from
// hbWorkers goroutines per client for window: as fast as answered if
// rate is 0, else paced at rate per second in total. Any error fails the
// benchmark: the members are settled, so every heartbeat must succeed.
func (t *hbTarget) drive(b *testing.B, window time.Duration, rate float64) hbLoad {
	b.Helper()
	p, clients, members, proto := t.p, t.clients, t.members, t.proto
	ctx, cancel := context.WithTimeout(context.Background(), window+30*time.Second)
	defer cancel()
	var (
		next    atomic.Int64
		failed  atomic.Int64
		firstMu sync.Mutex
		first   error
		wg      sync.WaitGroup
		lats    = make([][]time.Duration, len(clients)*hbWorkers)
	)
	var interval time.Duration
	if rate > 0 {
		interval = time.Duration(float64(time.Second) / rate)
	}
	cpu0, user0 := p.cpu(b)
	r0, w0 := p.syscalls()
	start := time.Now()
	end := start.Add(window)
	for w := range lats {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := clients[w%len(clients)]
			hb := kmsg.NewPtrHeartbeatRequest()
			cghb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			lat := make([]time.Duration, 0, 4096)
			for {
				k := next.Add(1) - 1
				if interval > 0 {
					at := start.Add(time.Duration(k) * interval)
					if at.After(end) {
						break
					}
					time.Sleep(time.Until(at))
				} else if time.Now().After(end) {
					break
				}
				m := &members[int(k%int64(len(members)))]
				var req kmsg.Request
				switch proto {
				case benchClassic:
					hb.Group, hb.Generation, hb.MemberID = benchGroup, m.gen, m.id
					req = hb
				case benchConsumer:
					cghb.Group, cghb.MemberEpoch, cghb.MemberID = benchGroup, m.gen, m.id
					req = cghb
				}
				sent := time.Now()
				resp, err := cl.Request(ctx, req)
				lat = append(lat, time.Since(sent))
				if err == nil {
					if code := responseCode(resp); code != 0 {
						err = fmt.Errorf("error code %d", code)
					}
				}
				if err != nil {
					failed.Add(1)
					firstMu.Lock()
					if first == nil {
						first = err
					}
					firstMu.Unlock()
				}
			}
			lats[w] = lat
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu1, user1 := p.cpu(b)
	r1, w1 := p.syscalls()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%s %s: %d heartbeats failed, the first with: %v", p.name, proto, n, first)
	}
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	slices.Sort(all)
	return hbLoad{sent: len(all), elapsed: elapsed, cpu: cpu1 - cpu0, user: user1 - user0, lat: all, reads: r1 - r0, writes: w1 - w0}
}
