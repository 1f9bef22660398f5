package deploy

import (
	"strings"
	"testing"
)

// dsVar is the dashboard's datasource variable: every panel and variable
// queries through it, so the dashboard imports into any Grafana and
// works with whichever Prometheus is chosen.
const dsVar = "DS_PROMETHEUS"

// TestDashboardShape checks what Grafana needs and what a person relies
// on: a datasource variable that every query goes through, panels with
// unique IDs laid out on the 24-column grid without overlapping, and
// targets with unique refIds and a query each.
func TestDashboardShape(t *testing.T) {
	d := readDashboard(t)
	if d.Title == "" || d.UID == "" || d.SchemaVersion == 0 {
		t.Errorf("title %q, uid %q, schemaVersion %d: all three are needed", d.Title, d.UID, d.SchemaVersion)
	}
	viaVar := func(ds *datasource) bool {
		return ds != nil && (ds.UID == "${"+dsVar+"}" || ds.UID == "$"+dsVar)
	}
	var hasDS bool
	for _, v := range d.Templating.List {
		switch v.Type {
		case "datasource":
			hasDS = hasDS || v.Name == dsVar && strings.Trim(string(v.Query), `"`) == "prometheus"
		case "query":
			if !viaVar(v.Datasource) {
				t.Errorf("variable %s does not query through ${%s}: %+v", v.Name, dsVar, v.Datasource)
			}
		}
	}
	if !hasDS {
		t.Errorf("no datasource variable %s of type prometheus", dsVar)
	}

	ids := map[int]string{}
	type cell struct{ x, y int }
	taken := map[cell]string{}
	var check func(ps []panel)
	check = func(ps []panel) {
		for _, p := range ps {
			if other, ok := ids[p.ID]; ok || p.ID == 0 {
				t.Errorf("panel %q: id %d is zero or also %q's", p.Title, p.ID, other)
			}
			ids[p.ID] = p.Title
			g := p.GridPos
			if g == nil || g.W < 1 || g.H < 1 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
				t.Errorf("panel %q: gridPos %+v is off the 24-column grid", p.Title, g)
			} else {
				for x := g.X; x < g.X+g.W; x++ {
					for y := g.Y; y < g.Y+g.H; y++ {
						if other, ok := taken[cell{x, y}]; ok {
							t.Errorf("panel %q overlaps %q at column %d, row %d", p.Title, other, x, y)
						}
						taken[cell{x, y}] = p.Title
					}
				}
			}
			if p.Type == "row" {
				check(p.Panels)
				continue
			}
			if p.Title == "" {
				t.Errorf("panel %d has no title", p.ID)
			}
			if !viaVar(p.Datasource) {
				t.Errorf("panel %q does not query through ${%s}: %+v", p.Title, dsVar, p.Datasource)
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no target", p.Title)
			}
			refs := map[string]bool{}
			for _, tg := range p.Targets {
				if tg.RefID == "" || refs[tg.RefID] {
					t.Errorf("panel %q: refId %q is empty or repeated", p.Title, tg.RefID)
				}
				refs[tg.RefID] = true
				if strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("panel %q target %s has no expr", p.Title, tg.RefID)
				}
				if tg.Datasource != nil && !viaVar(tg.Datasource) {
					t.Errorf("panel %q target %s queries %+v, not ${%s}", p.Title, tg.RefID, tg.Datasource, dsVar)
				}
			}
		}
	}
	check(d.Panels)
	if len(allPanels(d.Panels)) == 0 {
		t.Error("no panels")
	}
}
