package ontapsim

import (
	"net"
	"strings"
	"testing"
)

func TestExportPoliciesAndRules(t *testing.T) {
	a := newTestSim(t, Config{})
	svm := map[string]any{"name": "svm0"}
	r := a.must(201, "POST", "/api/protocols/nfs/export-policies?return_records=true", map[string]any{"name": "trident-abc", "svm": svm})
	id := int64(r.records()[0]["id"].(float64))
	if id != defaultPolicyID+1 {
		t.Fatalf("policy id %d, want %d (default+1)", id, defaultPolicyID+1)
	}
	a.wantErr(409, codeDuplicate, "POST", "/api/protocols/nfs/export-policies", map[string]any{"name": "trident-abc", "svm": svm})
	a.wantErr(400, codePolicyNameInvalid, "POST", "/api/protocols/nfs/export-policies", map[string]any{"name": "a b", "svm": svm})
	a.wantErr(400, codePolicyNameTooLong, "POST", "/api/protocols/nfs/export-policies", map[string]any{"name": strings.Repeat("p", 257), "svm": svm})
	if got := a.must(200, "GET", "/api/protocols/nfs/export-policies?name=trident-abc&fields=", nil).records(); len(got) != 1 {
		t.Fatalf("lookup: %v", got)
	}
	if got := a.must(200, "GET", "/api/protocols/nfs/export-policies?name=missing&fields=", nil); got.body["num_records"] != float64(0) {
		t.Fatalf("missing policy lookup must be 200 with 0 records: %s", got.raw)
	}

	rules := "/api/protocols/nfs/export-policies/" + itoa64(id) + "/rules"
	rule := func(match string) map[string]any {
		return map[string]any{"clients": []any{map[string]any{"match": match}}, "protocols": []any{"nfs"},
			"ro_rule": []any{"any"}, "rw_rule": []any{"any"}, "superuser": []any{"any"}}
	}
	for i, m := range []string{"10.0.0.5", "10.0.1.0/24", "10.0.2.0/255.255.255.0,10.0.3.7", "fd00::/64", "host.example.com", "@ng", ".example.com"} {
		r := a.must(201, "POST", rules+"?return_records=true", rule(m))
		if got := r.records()[0]["index"]; got != float64(i+1) {
			t.Fatalf("rule %s index %v, want %d", m, got, i+1)
		}
	}
	tests := []struct {
		name   string
		body   map[string]any
		status int
		code   int
	}{
		{"duplicate rule", rule("10.0.0.5"), 409, codeRuleDuplicate},
		{"bad address", rule("10.0.0.300"), 400, codeClientMatchInvalid},
		{"bad prefix", rule("10.0.0.0/33"), 400, codeClientMatchInvalid},
		{"duplicate in list", rule("10.0.0.9,10.0.0.9"), 400, codeClientMatchDup},
		{"empty entry", rule("10.0.0.9,"), 400, codeClientMatchInvalid},
		{"no clients", map[string]any{"protocols": []any{"nfs"}}, 400, codeMissingRequired},
		{"bad flavor", map[string]any{"clients": []any{map[string]any{"match": "10.9.9.9"}}, "ro_rule": []any{"kerberos"}}, 400, codeInvalidValue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a.t = t
			a.wantErr(tt.status, tt.code, "POST", rules, tt.body)
		})
	}
	a.t = t
	list := a.must(200, "GET", rules+"?fields=clients", nil)
	if len(list.records()) != 7 {
		t.Fatalf("rules: %s", list.raw)
	}
	a.must(200, "DELETE", rules+"/2", nil)
	a.wantErr(404, codeNotFound, "DELETE", rules+"/2", nil)
	a.wantErr(404, codePolicyNotFound, "GET", "/api/protocols/nfs/export-policies/999/rules", nil)
	a.wantErr(404, codePolicyNotFound, "POST", "/api/protocols/nfs/export-policies/999/rules", rule("10.1.1.1"))
	// The next index follows the highest in use.
	if r := a.must(201, "POST", rules+"?return_records=true", rule("10.5.5.5")); r.records()[0]["index"] != float64(8) {
		t.Fatalf("index after delete: %s", r.raw)
	}
	a.must(200, "PATCH", rules+"/1", map[string]any{"rw_rule": []any{"never"}})
	if g := a.must(200, "GET", rules+"/1", nil); strings.Join(toStrings(g.body["rw_rule"]), ",") != "never" {
		t.Fatalf("patched rule: %s", g.raw)
	}

	// Dependencies: default and in-use policies cannot be deleted; a volume
	// cannot use a policy that does not exist.
	a.wantErr(409, codePolicyIsDefault, "DELETE", "/api/protocols/nfs/export-policies/"+itoa64(defaultPolicyID), nil)
	vol := a.createVolume(map[string]any{"name": "v", "guarantee": map[string]any{"type": "none"}, "nas": map[string]any{"export_policy": map[string]any{"name": "trident-abc"}}})
	a.wantErr(409, codePolicyInUse, "DELETE", "/api/protocols/nfs/export-policies/"+itoa64(id), nil)
	a.wantErr(404, codeExportPolicyBad, "PATCH", "/api/storage/volumes/"+vol+"?return_timeout=10", map[string]any{"nas": map[string]any{"export_policy": map[string]any{"name": "nope"}}})
	a.must(200, "PATCH", "/api/storage/volumes/"+vol+"?return_timeout=10", map[string]any{"nas": map[string]any{"export_policy": map[string]any{"name": "default"}}})
	a.must(200, "DELETE", "/api/protocols/nfs/export-policies/"+itoa64(id), nil)
	a.wantErr(404, codeNotFound, "GET", "/api/protocols/nfs/export-policies/"+itoa64(id), nil)
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

func TestPolicyAccess(t *testing.T) {
	p := &policyState{Rules: []*ruleState{
		{Index: 3, Clients: []string{"0.0.0.0/0"}, Protocols: []string{"any"}, RORule: []string{"any"}, RWRule: []string{"any"}},
		{Index: 1, Clients: []string{"10.0.0.5"}, Protocols: []string{"nfs"}, RORule: []string{"sys"}, RWRule: []string{"never"}},
		{Index: 2, Clients: []string{"10.0.1.0/24,10.0.9.9"}, Protocols: []string{"cifs"}, RORule: []string{"any"}, RWRule: []string{"any"}},
		{Index: 4, Clients: []string{"::/0"}, Protocols: []string{"nfs4"}, RORule: []string{"never"}, RWRule: []string{"any"}},
	}}
	tests := []struct {
		ip     string
		ro, rw bool
	}{
		{"10.0.0.5", true, false},     // rule 1: read-only
		{"10.0.1.7", true, true},      // rule 2 is CIFS only: falls through to rule 3
		{"192.0.2.1", true, true},     // rule 3
		{"2001:db8::1", false, false}, // rule 4 denies reads, so no writes either
	}
	for _, tt := range tests {
		ro, rw := policyAccess(p, net.ParseIP(tt.ip))
		if ro != tt.ro || rw != tt.rw {
			t.Errorf("%s: ro=%v rw=%v, want ro=%v rw=%v", tt.ip, ro, rw, tt.ro, tt.rw)
		}
	}
	if ro, _ := policyAccess(&policyState{}, net.ParseIP("10.0.0.1")); ro {
		t.Error("a policy without rules must deny")
	}
}
