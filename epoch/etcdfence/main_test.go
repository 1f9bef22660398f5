package etcdfence_test

import (
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/tenure-dev/tenure/internal/testenv"
)

// etcd is the embedded etcd server that TestMain starts and every test
// shares; endpoints are its client URLs, which the example reads too.
var (
	etcd      *testenv.Etcd
	endpoints []string
)

// TestMain runs the package's tests against a real, embedded, single-member
// etcd server, then checks that neither the tests nor the stopped server left
// goroutines behind.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	etcd, err = testenv.StartEtcd()
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdfence: starting embedded etcd:", err)
		return 1
	}
	endpoints = etcd.Endpoints
	code := m.Run()
	etcd.Stop()
	return testenv.CheckLeaks(code)
}

var prefixSeq atomic.Int64

// uniquePrefix returns a key prefix no other test in this run uses.
func uniquePrefix(name string) string {
	return "/test/" + name + "/" + strconv.FormatInt(prefixSeq.Add(1), 10)
}
