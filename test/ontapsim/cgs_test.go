package ontapsim

import (
	"testing"
)

// TestConsistencyGroupSnapshot: a group of existing volumes is snapshot
// at one instant, all members or none; deleting the group keeps volumes
// and snapshots; a volume belongs to one group.
func TestConsistencyGroupSnapshot(t *testing.T) {
	a := newTestSim(t, Config{})
	thin := map[string]any{"type": "none"}
	for _, n := range []string{"v1", "v2", "v3"} {
		a.createVolume(map[string]any{"name": n, "guarantee": thin})
	}
	add := func(names ...string) []any {
		var out []any
		for _, n := range names {
			out = append(out, map[string]any{"name": n, "provisioning_options": map[string]any{"action": "add"}})
		}
		return out
	}
	const cgs = "/api/application/consistency-groups?return_timeout=30"
	a.must(201, "POST", cgs, map[string]any{"name": "g1", "svm": map[string]any{"name": "svm0"}, "volumes": add("v1", "v2")})
	a.wantErr(409, codeInUse, "POST", cgs, map[string]any{"name": "g2", "svm": map[string]any{"name": "svm0"}, "volumes": add("v2", "v3")})
	a.wantErr(404, codeNotFound, "POST", cgs, map[string]any{"name": "g3", "svm": map[string]any{"name": "svm0"}, "volumes": add("nope")})
	r := a.must(200, "GET", "/api/application/consistency-groups?name=g1&fields=uuid,volumes.name", nil)
	recs := r.records()
	if len(recs) != 1 || len(recs[0]["volumes"].([]any)) != 2 {
		t.Fatalf("g1: %s", r.raw)
	}
	uuid := recs[0]["uuid"].(string)

	// A member that already has the name: no member gets a snapshot.
	if _, err := a.sim.CreateSnapshot("v2", "s1"); err != nil {
		t.Fatal(err)
	}
	snaps := "/api/application/consistency-groups/" + uuid + "/snapshots?return_timeout=30"
	a.wantErr(409, codeSnapDuplicate, "POST", snaps, map[string]any{"name": "s1"})
	if got := a.sim.Snapshots("v1"); len(got) != 0 {
		t.Fatalf("a failed group snapshot left %v on v1", got)
	}
	a.must(201, "POST", snaps, map[string]any{"name": "s2"})
	s1, s2 := a.sim.Snapshots("v1"), a.sim.Snapshots("v2")
	if len(s1) != 1 || len(s2) != 2 || s1[0].Name != "s2" || !s1[0].CreateTime.Equal(s2[1].CreateTime) {
		t.Fatalf("group snapshot: v1 %+v, v2 %+v", s1, s2)
	}

	a.must(200, "DELETE", "/api/application/consistency-groups/"+uuid+"?return_timeout=30", nil)
	if len(a.sim.Snapshots("v1")) != 1 {
		t.Fatal("deleting the group took the snapshots")
	}
	a.must(201, "POST", cgs, map[string]any{"name": "g2", "svm": map[string]any{"name": "svm0"}, "volumes": add("v2", "v3")})

	old := newTestSim(t, Config{ONTAPVersion: "9.9.1"})
	old.wantErr(404, codeNotSupported, "GET", "/api/application/consistency-groups", nil)
}
