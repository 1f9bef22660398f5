package deploy

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v2"
)

// requireToolsEnv makes a missing tool a failure rather than a skip; CI
// sets it, so that the rules cannot go untested there unnoticed.
const requireToolsEnv = "TENURE_REQUIRE_TOOLS"

// promtool returns the path of promtool, skipping t without it unless
// requireToolsEnv is 1.
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err == nil {
		return path
	}
	const install = "Debian's prometheus package has it: apt-get install --no-install-recommends prometheus"
	if os.Getenv(requireToolsEnv) == "1" {
		t.Fatalf("promtool is not on PATH and %s=1: %s", requireToolsEnv, install)
	}
	t.Skipf("promtool is not on PATH, so the rules are not checked (%s; %s=1 makes this a failure)", install, requireToolsEnv)
	return ""
}

// runPromtool runs promtool with args in dir and fails t, with its
// output, if it fails.
func runPromtool(t *testing.T, bin, dir string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
}

// TestPromtool checks the rules' syntax (promtool check rules), runs
// their unit tests (promtool test rules), and checks the syntax of every
// PromQL query of the dashboard by handing them to promtool as recording
// rules, with Grafana's variables replaced.
func TestPromtool(t *testing.T) {
	bin := promtool(t)
	t.Run("check rules", func(t *testing.T) {
		runPromtool(t, bin, "prometheus", "check", "rules", filepath.Base(rulesPath))
	})
	t.Run("test rules", func(t *testing.T) {
		runPromtool(t, bin, "prometheus", "test", "rules", filepath.Base(ruleTestsPath))
	})
	t.Run("dashboard queries", func(t *testing.T) {
		type record struct {
			Record string `yaml:"record"`
			Expr   string `yaml:"expr"`
		}
		var recs []record
		for _, q := range dashboardQueries(t, readDashboard(t)) {
			recs = append(recs, record{Record: fmt.Sprintf("dashboard:query:%d", len(recs)), Expr: grafanaVars(q.expr)})
		}
		b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": recs}}})
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "dashboard.rules.yml"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		runPromtool(t, bin, dir, "check", "rules", "dashboard.rules.yml")
	})
}

// query is one PromQL query and where it was found.
type query struct {
	where string
	expr  string
	// label is set for a variable's label_values(expr, label).
	label string
}

var labelValuesRe = regexp.MustCompile(`^\s*label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$`)

// dashboardQueries returns every PromQL query of d: its panels' targets
// and the selectors of its label_values variables. It fails t on a
// variable query of another kind, which the checks here cannot read.
func dashboardQueries(t *testing.T, d dashboard) []query {
	t.Helper()
	var qs []query
	for _, p := range allPanels(d.Panels) {
		for _, tg := range p.Targets {
			qs = append(qs, query{where: fmt.Sprintf("panel %q target %s", p.Title, tg.RefID), expr: tg.Expr})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValuesRe.FindStringSubmatch(varQuery(v.Query))
		if m == nil {
			t.Fatalf("variable %s: query %q is not label_values(selector, label)", v.Name, varQuery(v.Query))
		}
		qs = append(qs, query{where: "variable " + v.Name, expr: m[1], label: m[2]})
	}
	return qs
}

var grafanaVarRe = regexp.MustCompile(`\$(\{[a-zA-Z0-9_]+\}|[a-zA-Z0-9_]+)`)

// grafanaVars replaces Grafana's variables as Grafana would with some
// value: its interval variables by a duration, the others by a word (they
// stand inside label matchers' strings).
func grafanaVars(expr string) string {
	return grafanaVarRe.ReplaceAllStringFunc(expr, func(v string) string {
		if strings.HasPrefix(strings.Trim(v, "${"), "__") {
			return "5m"
		}
		return "x"
	})
}
