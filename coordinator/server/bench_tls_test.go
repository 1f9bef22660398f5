package server

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"

	"github.com/tenure-dev/tenure/internal/testpki"
)

// BenchmarkHeartbeatTLS compares BenchmarkHeartbeat1000's load on
// `tenure serve` over plaintext and over TLS (an SSL listener, TLS 1.3,
// ECDSA P-256; the 4 load connections are set up before the windows, so
// the handshakes are not measured), the two servers taking turns in one
// run. Reported as BenchmarkHeartbeat1000 does, with the ratios
//
//	rate-tls/plain   heartbeats per second over TLS / over plaintext
//	cpu-tls/plain    server CPU per heartbeat over TLS / over plaintext
func BenchmarkHeartbeatTLS(b *testing.B) {
	bins := buildServers(b)
	defer debug.SetGCPercent(debug.SetGCPercent(800))
	servers := [...]string{"tenure", "tenure-tls"}
	for _, proto := range []benchProtocol{benchClassic, benchConsumer} {
		b.Run(proto.String(), func(b *testing.B) {
			var full, half [len(servers)]hbLoad
			for range b.N {
				var targets [len(servers)]*hbTarget
				for i, srv := range servers {
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
			for i, srv := range servers {
				b.Logf("%s %s: full load %.0f hb/s, %.2f µs CPU/hb, %.2f reads/hb, %.2f writes/hb; half load p50 %v p99 %v",
					srv, proto, full[i].rate(), us(full[i].cpuPerHB()),
					float64(full[i].reads)/float64(full[i].sent), float64(full[i].writes)/float64(full[i].sent),
					half[i].pct(50), half[i].pct(99))
				b.ReportMetric(full[i].rate(), srv+"-hb/s")
				b.ReportMetric(us(full[i].cpuPerHB()), srv+"-cpu-us/hb")
				b.ReportMetric(float64(half[i].pct(99).Nanoseconds())/1e6, srv+"-p99-ms")
			}
			if full[0].rate() > 0 && full[0].cpuPerHB() > 0 {
				b.ReportMetric(full[1].rate()/full[0].rate(), "rate-tls/plain")
				b.ReportMetric(us(full[1].cpuPerHB())/us(full[0].cpuPerHB()), "cpu-tls/plain")
			}
		})
	}
}

// benchTLSFiles writes a server certificate for 127.0.0.1 and its key
// into a temporary directory, and returns them with a client
// configuration that trusts them.
func benchTLSFiles(b *testing.B) (certFile, keyFile string, client *tls.Config) {
	b.Helper()
	ca := testpki.New(b, "bench CA")
	cert := ca.Issue(pkix.Name{CommonName: "tenure"})
	dir := b.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, cert.CertPEM, 0o600); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(keyFile, cert.KeyPEM, 0o600); err != nil {
		b.Fatal(err)
	}
	return certFile, keyFile, ca.ClientConfig()
}
