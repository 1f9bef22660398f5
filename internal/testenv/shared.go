package testenv

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// RunWithEtcd is the body of a TestMain whose tests share one embedded
// etcd server: it starts the server, hands it to started, runs the tests,
// stops the server and checks for leaked goroutines. pkg names the package
// in the error of a server that does not start.
func RunWithEtcd(m *testing.M, pkg string, started func(*Etcd)) int {
	e, err := StartEtcd()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: starting embedded etcd: %v\n", pkg, err)
		return 1
	}
	started(e)
	code := m.Run()
	e.Stop()
	return CheckLeaks(code)
}

var prefixSeq atomic.Int64

// UniquePrefix returns a key prefix, ending in "/", that no other test of
// this process uses on a shared server.
func UniquePrefix(t testing.TB) string {
	name := strings.NewReplacer("/", "_", "#", "_").Replace(t.Name())
	return "/test/" + name + "/" + strconv.FormatInt(prefixSeq.Add(1), 10) + "/"
}
