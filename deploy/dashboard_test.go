package deploy

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"
)

// dashboardFile is the Grafana dashboard of Trident's series as ontap-csi
// serves them. cmd/ontap-csi's operator test renders its queries against a
// scrape of the running controller; this checks its form.
const dashboardFile = "grafana/ontap-csi-trident.json"

var dashboardMetric = regexp.MustCompile(`\b(trident|ontap_csi)_[a-z_]+`)

func TestGrafanaDashboard(t *testing.T) {
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID        string `json:"uid"`
		Title      string `json:"title"`
		Templating struct {
			List []struct{ Name, Type string } `json:"list"`
		} `json:"templating"`
		Panels []struct {
			ID         int    `json:"id"`
			Type       string `json:"type"`
			Title      string `json:"title"`
			Datasource struct {
				UID string `json:"uid"`
			} `json:"datasource"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.UID == "" || d.Title == "" || len(d.Templating.List) == 0 || d.Templating.List[0].Type != "datasource" {
		t.Fatalf("%s: uid %q, title %q, templating %+v: want a uid, a title and a datasource variable first", dashboardFile, d.UID, d.Title, d.Templating.List)
	}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		// Imported anywhere, the panels follow the chosen Prometheus.
		if p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("panel %q: datasource %q, %d queries", p.Title, p.Datasource.UID, len(p.Targets))
		}
		for _, tg := range p.Targets {
			if !dashboardMetric.MatchString(tg.Expr) {
				t.Errorf("panel %q: query %q uses none of ontap-csi's series", p.Title, tg.Expr)
			}
		}
	}
}
