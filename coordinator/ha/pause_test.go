package ha_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/tenure-dev/tenure/coordinator/ha"
	"github.com/tenure-dev/tenure/internal/testenv"
)

// The child of TestPausedLeader is this test binary, started with these
// variables set; TestMain runs pausedChild instead of the tests.
const (
	childEnv          = "TENURE_HA_PAUSED_CHILD"
	childEndpointsEnv = "TENURE_HA_CHILD_ENDPOINTS"
	childPrefixEnv    = "TENURE_HA_CHILD_PREFIX"
)

// pausedChild joins the set, wins a term, reports it ("term <revision>"),
// and polls Valid every 2 ms. When two polls are more than a TTL apart
// (it was stopped in between), it reports what it finds on waking:
// whether the term is valid at the first poll after the pause, whether a
// write guarded by the term succeeds, and whether Done is closed; then it
// exits.
func pausedChild() int {
	fail := func(what string, err error) int {
		fmt.Fprintln(os.Stderr, "child:", what, err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   strings.Split(os.Getenv(childEndpointsEnv), ","),
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return fail("client", err)
	}
	defer cli.Close()
	prefix := os.Getenv(childPrefixEnv)
	// Its log goes to stderr as JSON: the parent reads the lease's end.
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.Lock(os.Stderr), zap.WarnLevel))
	defer log.Sync()
	n, err := ha.Join(ctx, cli, "child.test:9092", ha.Prefix(prefix), ha.ElectionTTL(ttl), ha.Logger(log))
	if err != nil {
		return fail("join", err)
	}
	defer n.Close()
	var term *ha.Term
	select {
	case term = <-n.Terms():
	case <-ctx.Done():
		return fail("no term", ctx.Err())
	}
	fmt.Printf("term %d\n", term.Revision())
	prev := time.Now()
	for {
		now := time.Now()
		gap := now.Sub(prev)
		prev = now
		valid := term.Valid(now)
		if gap > ttl {
			resp, err := cli.Txn(ctx).If(term.Guard()).
				Then(clientv3.OpPut(prefix+"probe", "written by the paused leader")).Commit()
			if err != nil {
				return fail("guarded write", err)
			}
			done := false
			select {
			case <-term.Done():
				done = true
			case <-time.After(100 * time.Millisecond):
			}
			fmt.Printf("woke gap=%s valid=%v guard=%v done=%v\n", gap, valid, resp.Succeeded, done)
			return 0
		}
		if !valid {
			fmt.Println("invalid before any pause")
			return 1
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestPausedLeader stops a leader process with SIGSTOP for longer than the
// TTL: another node wins meanwhile, and when the paused leader runs again
// its term is invalid at its first check, Done is closed, and its guarded
// write fails in etcd, while the new leader's term is untouched.
func TestPausedLeader(t *testing.T) {
	t.Parallel()
	prefix := uniquePrefix(t)
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childEnv+"=1",
		childEndpointsEnv+"="+strings.Join(etcd.Endpoints, ","), childPrefixEnv+"="+prefix)
	var stderr bytes.Buffer
	child.Stderr = &stderr
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 10)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	})
	// Wait closes the pipe, so it comes after the reader is done.
	waited := false
	wait := func() error {
		waited = true
		for range lines {
		}
		wg.Wait()
		return child.Wait()
	}
	t.Cleanup(func() {
		if !waited {
			child.Process.Signal(syscall.SIGCONT)
			child.Process.Kill()
			wait()
		}
		if t.Failed() {
			t.Logf("child's stderr:\n%s", stderr.String())
		}
	})
	line := func(what string) string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the child exited before %s", what)
			}
			return l
		case <-time.After(15 * time.Second):
			t.Fatalf("the child did not report %s", what)
		}
		return ""
	}
	var childRev int64
	if _, err := fmt.Sscanf(line("its term"), "term %d", &childRev); err != nil {
		t.Fatal(err)
	}

	rec := newRecorder(t)
	cli := etcd.Client(t)
	n := join(t, cli, prefix, addr(1))
	rec.follow(1, n)
	rec.none(2*ttl, "while the child leads")

	if err := child.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	won := rec.next(5 * ttl)
	t.Logf("won %v after the leader was stopped", time.Since(stopped).Round(time.Millisecond))
	if won.term.Revision() <= childRev {
		t.Fatalf("revision %d after the paused leader's %d", won.term.Revision(), childRev)
	}
	// Make sure the pause lasts longer than the TTL.
	time.Sleep(time.Until(stopped.Add(ttl * 3 / 2)))
	if err := child.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	woke := line("what it found on waking")
	t.Logf("child: %s", woke)
	f := strings.Fields(woke)
	if len(f) != 5 || f[0] != "woke" {
		t.Fatalf("child reported %q", woke)
	}
	for _, kv := range f[2:] {
		k, v, _ := strings.Cut(kv, "=")
		switch b, _ := strconv.ParseBool(v); {
		case k == "valid" && b:
			t.Error("the paused leader's term was valid at its first check after the pause")
		case k == "guard" && b:
			t.Error("the paused leader's guarded write succeeded")
		case k == "done" && !b:
			t.Error("the paused leader's term was not done 100 ms after the pause")
		}
	}
	if !won.term.Valid(time.Now()) {
		t.Fatal("the new leader's term is not valid after the paused leader woke")
	}
	if !guardWrites(t, cli, prefix, won.term) {
		t.Fatal("the new leader's guarded write failed")
	}
	resp, err := cli.Get(testenv.Context(t), prefix+"probe")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != strconv.FormatInt(won.term.Revision(), 10) {
		t.Fatalf("probe: %v %v", resp, err)
	}
	if err := wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	// The child's log says how late the lease's watchdog ran: by about
	// the pause (1.5 TTL) less what was left of the deadline (under a
	// TTL), not the microseconds of a timer that fired on time.
	late, ok := lateBy(stderr.String())
	if !ok {
		t.Fatalf("no \"lease in doubt\" line with late_by in the child's log:\n%s", stderr.String())
	}
	if late < ttl/3 {
		t.Errorf("lease in doubt: late_by %v after a pause of %v", late, ttl*3/2)
	}
}

// lateBy reads late_by from the child's "lease in doubt" log line.
func lateBy(log string) (time.Duration, bool) {
	for l := range strings.Lines(log) {
		var e struct {
			Msg    string  `json:"msg"`
			LateBy float64 `json:"late_by"` // seconds: the production encoder's durations
		}
		if json.Unmarshal([]byte(l), &e) == nil && strings.HasPrefix(e.Msg, "lease in doubt") {
			return time.Duration(e.LateBy * float64(time.Second)), true
		}
	}
	return 0, false
}
