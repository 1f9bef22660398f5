package deploy

import (
	"encoding/json"
	"os"
	"testing"

	"go.yaml.in/yaml/v2"
)

// The files under test, relative to this package.
const (
	rulesPath     = "prometheus/tenure.rules.yml"
	ruleTestsPath = "prometheus/tenure.rules.test.yml"
	dashboardPath = "grafana/tenure.json"
	alertsDocPath = "../docs/ALERTS.md"
)

// ruleFile is the part of a Prometheus rule file the tests read.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []rule `yaml:"rules"`
	} `yaml:"groups"`
}

type rule struct {
	Record      string            `yaml:"record"`
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// ruleTestFile is the part of a promtool test file the tests read.
type ruleTestFile struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		Name       string `yaml:"name"`
		AlertTests []struct {
			EvalTime  string `yaml:"eval_time"`
			Alertname string `yaml:"alertname"`
			ExpAlerts []struct {
				ExpLabels map[string]string `yaml:"exp_labels"`
			} `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

// dashboard is the part of a Grafana dashboard the tests read.
type dashboard struct {
	Title         string `json:"title"`
	UID           string `json:"uid"`
	SchemaVersion int    `json:"schemaVersion"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Definition string          `json:"definition"`
			Datasource *datasource     `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type panel struct {
	ID         int         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	Datasource *datasource `json:"datasource"`
	GridPos    *struct {
		H int `json:"h"`
		W int `json:"w"`
		X int `json:"x"`
		Y int `json:"y"`
	} `json:"gridPos"`
	Targets []struct {
		RefID      string      `json:"refId"`
		Expr       string      `json:"expr"`
		Datasource *datasource `json:"datasource"`
	} `json:"targets"`
	// Panels are a collapsed row's.
	Panels []panel `json:"panels"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

func readRules(t *testing.T) ruleFile {
	t.Helper()
	var f ruleFile
	readYAML(t, rulesPath, &f)
	if len(f.Groups) == 0 {
		t.Fatalf("%s: no rule groups", rulesPath)
	}
	return f
}

func readRuleTests(t *testing.T) ruleTestFile {
	t.Helper()
	var f ruleTestFile
	readYAML(t, ruleTestsPath, &f)
	return f
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	return d
}

// allPanels returns the dashboard's panels, a collapsed row's included,
// rows excluded.
func allPanels(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		if p.Type == "row" {
			out = append(out, allPanels(p.Panels)...)
			continue
		}
		out = append(out, p)
	}
	return out
}

// varQuery returns the query of a templating variable of type query,
// which Grafana stores as a string or as {"query": ...}.
func varQuery(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var q struct {
		Query string `json:"query"`
	}
	json.Unmarshal(raw, &q)
	return q.Query
}
