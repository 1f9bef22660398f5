package deploy

import (
	"os"
	"regexp"
	"slices"
	"sort"
	"testing"
)

// TestRulesShape checks what the alerts promise their readers: a
// severity Alertmanager can route on, a summary and a description, a
// promtool test that shows each alert firing and one that shows it
// quiet, and a section of docs/ALERTS.md.
func TestRulesShape(t *testing.T) {
	rules := readRules(t)
	tests := readRuleTests(t)
	if !slices.Contains(tests.RuleFiles, "tenure.rules.yml") {
		t.Errorf("%s tests %q, not tenure.rules.yml", ruleTestsPath, tests.RuleFiles)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, at := range tc.AlertTests {
			if len(at.ExpAlerts) == 0 {
				quiet[at.Alertname] = true
			} else {
				fires[at.Alertname] = true
			}
		}
	}
	doc, err := os.ReadFile(alertsDocPath)
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^### (Tenure[A-Za-z]+)\s*$`).FindAllStringSubmatch(string(doc), -1) {
		documented[m[1]] = true
	}

	alerts := map[string]bool{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts[r.Alert] = true
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: severity %q, want warning or critical", r.Alert, s)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: summary or description missing", r.Alert)
			}
		}
	}
	var names []string
	for a := range alerts {
		names = append(names, a)
	}
	sort.Strings(names)
	for _, a := range names {
		if !fires[a] {
			t.Errorf("%s: no test shows it firing", a)
		}
		if !quiet[a] {
			t.Errorf("%s: no test shows it quiet", a)
		}
		if !documented[a] {
			t.Errorf("%s: no section ### %s in %s", a, a, alertsDocPath)
		}
	}
	for a := range fires {
		if !alerts[a] {
			t.Errorf("%s is tested but is not an alert of %s", a, rulesPath)
		}
	}
	for a := range documented {
		if !alerts[a] {
			t.Errorf("%s documents %s, which is not an alert of %s", alertsDocPath, a, rulesPath)
		}
	}
	if len(names) == 0 {
		t.Error("no alerts")
	}
}
