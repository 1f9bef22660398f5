//go:build unix

package interop

import "fmt"

// judge holds a run to what is expected of it: every check passes, unless
// the run is listed in expectedFailures, when it must fail exactly the
// checks listed (a subset of them: a run failing fewer is a surprise).
func judge(name string, r row) error {
	failed := r.failed()
	exp, listed := expectedFailures[name]
	switch {
	case !listed && len(failed) == 0:
		return nil
	case !listed:
		return fmt.Errorf("%s failed %v: %+v", name, failed, r)
	case len(failed) == 0:
		return fmt.Errorf("%s passed, but is listed as failing %v (%s): take it off the list", name, exp.checks, exp.why)
	}
	for _, f := range failed {
		if !contains(exp.checks, f) {
			return fmt.Errorf("%s failed %v, but is listed as failing only %v (%s): %+v", name, failed, exp.checks, exp.why, r)
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// expectation is a run known to fail, and why.
type expectation struct {
	checks []string
	why    string
}

// expectedFailures lists the runs that fail for a reason in the client
// that nothing a server answers can change (docs/FAILOVER.md shows each
// from the client's source), by client/topology/fault.
var expectedFailures = map[string]expectation{}
