package etcdfence_test

import (
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
	return testenv.RunWithEtcd(m, "etcdfence", func(e *testenv.Etcd) {
		etcd, endpoints = e, e.Endpoints
	})
}

var prefixSeq atomic.Int64

// uniquePrefix returns a key prefix no other test in this run uses.
func uniquePrefix(name string) string {
	return "/test/" + name + "/" + strconv.FormatInt(prefixSeq.Add(1), 10)
}
