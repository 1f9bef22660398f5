// Command kfakeserver runs kfake, franz-go's in-process fake Kafka
// cluster, as a process of its own: one broker on one port, with the
// given topics seeded and the group timeouts the benchmarks need, so that
// tenure and kfake are measured the same way (server CPU from the
// process, clients in another process).
//
//	kfakeserver --listen 127.0.0.1:9092 --topic jobs --partitions 64 \
//	    [--consumer-session-timeout 60s] [--consumer-heartbeat-interval 5s] \
//	    [--max-session-timeout 5m] [--cpuprofile file]
//
// It prints "listening on host:port" once it accepts connections and
// stops on SIGINT or SIGTERM.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/tenure-dev/tenure/coordinator/server/internal/cpuprof"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "`host:port` to accept clients on; the host must be 127.0.0.1 (kfake listens on loopback only)")
	topic := flag.String("topic", "jobs", "topic to create at start (empty: none)")
	partitions := flag.Int("partitions", 64, "partitions of --topic")
	cSession := flag.Duration("consumer-session-timeout", 45*time.Second, "group.consumer.session.timeout.ms (KIP-848)")
	cHeartbeat := flag.Duration("consumer-heartbeat-interval", 5*time.Second, "group.consumer.heartbeat.interval.ms (KIP-848)")
	maxSession := flag.Duration("max-session-timeout", 5*time.Minute, "largest classic session timeout accepted")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile to `file` until stopped")
	flag.Parse()
	if err := run(*listen, *topic, *partitions, *cSession, *cHeartbeat, *maxSession, *cpuprofile); err != nil {
		fmt.Fprintln(os.Stderr, "kfakeserver:", err)
		os.Exit(1)
	}
}

func run(listen, topic string, partitions int, cSession, cHeartbeat, maxSession time.Duration, cpuprofile string) error {
	host, portStr, err := net.SplitHostPort(listen)
	if err != nil {
		return err
	}
	if host != "127.0.0.1" {
		return fmt.Errorf("--listen host %q: kfake listens on 127.0.0.1 only", host)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return fmt.Errorf("--listen port %q: %w", portStr, err)
	}
	opts := []kfake.Opt{
		kfake.Ports(port),
		kfake.GroupMaxSessionTimeout(maxSession),
		kfake.BrokerConfigs(map[string]string{
			"group.consumer.session.timeout.ms":    strconv.FormatInt(cSession.Milliseconds(), 10),
			"group.consumer.heartbeat.interval.ms": strconv.FormatInt(cHeartbeat.Milliseconds(), 10),
		}),
	}
	if topic != "" {
		opts = append(opts, kfake.SeedTopics(int32(partitions), topic))
	}
	stopProfile, err := cpuprof.Start(cpuprofile)
	if err != nil {
		return err
	}
	defer stopProfile()
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Printf("listening on %s\n", c.ListenAddrs()[0])
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	return nil
}
