package rest

import (
	"context"
	"slices"
	"testing"

	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

// The whole-SVM listings answer in one request each, with the fields the
// single-object reads have.
func TestSimListingsOneRequestEach(t *testing.T) {
	s, c := startSim(t, ontapsim.Config{}, nil)
	ctx := context.Background()
	p1 := must(c.CreateExportPolicy(ctx, "p1", ExportRule{Clients: []string{"10.0.0.1"}}, ExportRule{Clients: []string{"10.0.0.0/24"}, RWRule: []string{"never"}}))(t)
	must(c.CreateExportPolicy(ctx, "p2"))(t)
	must(c.CreateIgroup(ctx, "ig1", "iqn.1994-05.com.redhat:a", "iqn.1994-05.com.redhat:b"))(t)
	must(c.CreateIgroup(ctx, "ig2"))(t)

	s.ResetStats()
	pols := must(c.ListExportPoliciesWithRules(ctx))(t)
	igs := must(c.ListIgroups(ctx))(t)
	st := s.Stats()
	for _, k := range []string{"GET /api/protocols/nfs/export-policies", "GET /api/protocols/san/igroups"} {
		if n := st.Endpoints[k].Requests; n != 1 {
			t.Errorf("%s: %d requests, want 1", k, n)
		}
	}
	byName := map[string]ExportPolicyRules{}
	for _, p := range pols {
		byName[p.Name] = p
	}
	got := byName["p1"]
	if got.ID != p1.ID || len(got.Rules) != 2 || !slices.Equal(got.Rules[0].Clients, []string{"10.0.0.1"}) ||
		!slices.Equal(got.Rules[1].RWRule, []string{"never"}) || got.Rules[0].Index == 0 {
		t.Errorf("p1 listed as %+v", got)
	}
	if p2, ok := byName["p2"]; !ok || len(p2.Rules) != 0 {
		t.Errorf("p2 listed as %+v (present %v)", p2, ok)
	}
	igByName := map[string]Igroup{}
	for _, ig := range igs {
		igByName[ig.Name] = ig
	}
	if ig := igByName["ig1"]; ig.UUID == "" || !sameSet(ig.Initiators, []string{"iqn.1994-05.com.redhat:a", "iqn.1994-05.com.redhat:b"}) {
		t.Errorf("ig1 listed as %+v", ig)
	}
	if ig, ok := igByName["ig2"]; !ok || len(ig.Initiators) != 0 {
		t.Errorf("ig2 listed as %+v (present %v)", ig, ok)
	}
}
