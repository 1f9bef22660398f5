// Package deploy holds what runs beside tenure rather than in it:
// Prometheus rules (prometheus/tenure.rules.yml, with their unit tests in
// prometheus/tenure.rules.test.yml) and a Grafana dashboard
// (grafana/tenure.json). docs/ALERTS.md explains each alert.
//
// There is no Go code here, only tests: they run promtool on the rules
// and their unit tests (skipped without promtool on PATH, a failure with
// TENURE_REQUIRE_TOOLS=1, as CI sets it), check the dashboard's shape,
// and check every metric and label the rules and the dashboard use
// against what tenure's server, HA node, etcd store and embedded etcd
// really register, so that renaming a metric breaks `make test` instead
// of an alert.
package deploy
