//go:build unix

package interop

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// client is one client library of the matrix, run by a driver program.
type client struct {
	name string
	// protocol is the group protocol: consumer (KIP-848) or classic.
	protocol string
	// argv is the driver's command line for one consumer.
	argv func(seeds []string, group, topic string) []string
	// missing says why the driver cannot run here ("" if it can).
	missing func() string
	// observe is the least a run of this client watches after the fault,
	// above -interop.observe: long enough for the client's own timeouts
	// on a coordinator that never answers to run out.
	observe time.Duration
}

// tools are the programs the drivers need, found or built once per test.
type tools struct {
	kgo    string // the kgo driver, built from drivers/kgo
	python string // Debian's python3, whose dist-packages hold the clients
	node   string
	dir    string // this package's drivers/ directory
}

func pythonMissing(python, module string) func() string {
	return func() string {
		if python == "" {
			return "no python3"
		}
		if out, err := exec.Command(python, "-c", "import "+module).CombinedOutput(); err != nil {
			return fmt.Sprintf("%s cannot import %s (apt-get install python3-%s): %v %s", python, module,
				strings.ReplaceAll(strings.ReplaceAll(module, "_", "-"), "kafka", "kafka"), err, out)
		}
		return ""
	}
}

func nodeMissing(tl tools, pkg string) func() string {
	return func() string {
		if tl.node == "" {
			return "no node"
		}
		if _, err := os.Stat(filepath.Join(tl.dir, "node", "node_modules", pkg, "package.json")); err != nil {
			return fmt.Sprintf("%s is not installed: npm ci --prefix %s", pkg, filepath.Join(tl.dir, "node"))
		}
		return ""
	}
}

// clients are the matrix's clients, in the table's order.
func clients(tl tools) []client {
	none := func() string { return "" }
	join := func(s []string) string { return strings.Join(s, ",") }
	return []client{
		{name: "kgo-848", protocol: "consumer", missing: none, argv: func(seeds []string, group, topic string) []string {
			return []string{tl.kgo, "-brokers", join(seeds), "-group", group, "-topic", topic, "-protocol", "consumer", "-log-level", kgoLogLevel()}
		}},
		{name: "kgo-classic", protocol: "classic", missing: none, argv: func(seeds []string, group, topic string) []string {
			return []string{tl.kgo, "-brokers", join(seeds), "-group", group, "-topic", topic, "-protocol", "classic", "-log-level", kgoLogLevel()}
		}},
		{name: "librdkafka", protocol: "classic", missing: pythonMissing(tl.python, "confluent_kafka"), argv: func(seeds []string, group, topic string) []string {
			return []string{tl.python, filepath.Join(tl.dir, "python", "rdkafka_driver.py"), join(seeds), group, topic}
		}},
		{name: "kafka-python", protocol: "classic", missing: pythonMissing(tl.python, "kafka"), argv: func(seeds []string, group, topic string) []string {
			return []string{tl.python, filepath.Join(tl.dir, "python", "kafka_python_driver.py"), join(seeds), group, topic}
		}},
		// kafkajs waits out its requestTimeout (30 s by default) on a
		// coordinator that accepts and never answers, then retries:
		// watched for 20 s, a frozen or cut-off coordinator showed
		// nothing of what it does to it (FAILOVER.md).
		{name: "kafkajs", protocol: "classic", missing: nodeMissing(tl, "kafkajs"), observe: 65 * time.Second, argv: func(seeds []string, group, topic string) []string {
			return []string{tl.node, filepath.Join(tl.dir, "node", "kafkajs_driver.mjs"), join(seeds), group, topic}
		}},
		// @platformatic/kafka: a request on a frozen connection ends after
		// its connection's requestTimeout (30 s), and what follows (a
		// Fetch's end destroys the stream) falls past a 20 s window.
		{name: "platformatic", protocol: "consumer", missing: nodeMissing(tl, "@platformatic/kafka"), observe: 40 * time.Second, argv: func(seeds []string, group, topic string) []string {
			return []string{tl.node, filepath.Join(tl.dir, "node", "platformatic_driver.mjs"), join(seeds), group, topic}
		}},
	}
}

// consumer is one running driver.
type consumer struct {
	name     string
	cmd      *exec.Cmd
	events   string // its stdout: JSON lines
	mu       sync.Mutex
	done     chan struct{}
	stopping bool
	exitedAt time.Time // set if it exited before it was asked to
}

func startConsumer(t *testing.T, name, dir string, argv []string) *consumer {
	c := &consumer{name: name, events: filepath.Join(dir, name+".jsonl"), done: make(chan struct{})}
	stdout, err := os.Create(c.events)
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	c.cmd = exec.Command(argv[0], argv[1:]...)
	c.cmd.Stdout, c.cmd.Stderr = stdout, stderr
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		c.cmd.Wait()
		stdout.Close()
		stderr.Close()
		c.mu.Lock()
		if !c.stopping {
			c.exitedAt = time.Now()
		}
		c.mu.Unlock()
		close(c.done)
	}()
	t.Cleanup(func() { c.stop(0) })
	return c
}

// stop asks the driver to leave (SIGTERM), and kills it after grace.
func (c *consumer) stop(grace time.Duration) {
	c.mu.Lock()
	c.stopping = true
	c.mu.Unlock()
	select {
	case <-c.done:
		return
	default:
	}
	if grace > 0 {
		c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
			return
		case <-time.After(grace):
		}
	}
	syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	<-c.done
}

// read returns the driver's events so far, with an exited event if it
// died on its own.
func (c *consumer) read() []Event {
	f, err := os.Open(c.events)
	if err != nil {
		return nil
	}
	defer f.Close()
	evs, _ := ReadEvents(f)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.exitedAt.IsZero() {
		evs = append(evs, Event{T: float64(c.exitedAt.UnixMicro()) / 1e3, Ev: "exited"})
	}
	return evs
}
