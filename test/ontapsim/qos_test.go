package ontapsim

import (
	"net/http"
	"testing"
)

// TestQoSPolicies: the adaptive groups every cluster has, a fixed group an
// administrator makes, and objects that name a group that does not exist
// refused without a change.
func TestQoSPolicies(t *testing.T) {
	a := newTestSim(t, Config{})
	if err := a.sim.CreateQoSPolicy("gold", false, 5000); err != nil {
		t.Fatal(err)
	}
	a.wantErr(409, codeDuplicate, "POST", "/api/storage/qos/policies", map[string]any{"name": "gold", "svm": map[string]any{"name": "svm0"}})
	r := a.must(200, "GET", "/api/storage/qos/policies?name=gold&fields=name,scope,svm.uuid,fixed.max_throughput_iops", nil)
	if recs := r.records(); len(recs) != 1 || recs[0]["scope"] != "svm" || dig(recs[0], "fixed.max_throughput_iops") != float64(5000) {
		t.Fatalf("gold: %v", r.raw)
	}
	r = a.must(200, "GET", "/api/storage/qos/policies?name=extreme&fields=name,scope,adaptive", nil)
	if recs := r.records(); len(recs) != 1 || recs[0]["scope"] != "cluster" || recs[0]["adaptive"] == nil {
		t.Fatalf("extreme: %v", r.raw)
	}

	uuid := a.createVolume(map[string]any{"name": "v", "guarantee": map[string]any{"type": "none"}})
	p := "/api/storage/volumes/" + uuid + "?return_timeout=10"
	tests := []struct {
		name, policy string
		status       int
		want         string // the volume's group afterwards
	}{
		{"unknown group", "tin", http.StatusNotFound, ""},
		{"fixed group", "gold", http.StatusOK, "gold"},
		{"unknown group leaves the old one", "tin", http.StatusNotFound, "gold"},
		{"adaptive group of the cluster", "extreme", http.StatusOK, "extreme"},
		{"none takes it out", "none", http.StatusOK, ""},
	}
	for _, tc := range tests {
		r := a.do("PATCH", p, map[string]any{"qos": map[string]any{"policy": map[string]any{"name": tc.policy}}, "comment": "changed " + tc.name})
		v, _ := a.sim.Volume("v")
		if r.status != tc.status || v.QoSPolicy != tc.want {
			t.Errorf("%s: status %d group %q, want %d %q: %s", tc.name, r.status, v.QoSPolicy, tc.status, tc.want, r.raw)
		}
		if changed := v.Comment == "changed "+tc.name; changed != (tc.status == http.StatusOK) {
			t.Errorf("%s: comment %q: a refused PATCH must change nothing", tc.name, v.Comment)
		}
	}

	a.wantErr(404, codeNotFound, "POST", "/api/storage/volumes?return_timeout=10", map[string]any{
		"name": "w", "svm": map[string]any{"name": "svm0"}, "aggregates": []any{map[string]any{"name": "aggr1"}},
		"qos": map[string]any{"policy": map[string]any{"name": "tin"}}})
	if _, ok := a.sim.Volume("w"); ok {
		t.Fatal("volume created in a group that does not exist")
	}

	lun := a.createLUN("/vol/v/lun0", 1<<20)
	a.wantErr(404, codeNotFound, "PATCH", "/api/storage/luns/"+lun, map[string]any{"qos_policy": map[string]any{"name": "tin"}})
	a.must(200, "PATCH", "/api/storage/luns/"+lun, map[string]any{"qos_policy": map[string]any{"name": "gold"}})
	if l := a.sim.LUNs(); len(l) != 1 || l[0].QoSPolicy != "gold" {
		t.Fatalf("LUN group: %+v", l)
	}
}
