package ontapsim

import (
	"strings"
	"testing"
)

// TestDefaultObjects checks what a fresh SVM has (docs/design/ontap-rest.md §4.6) and
// the discovery calls a Trident-style backend makes at init (docs/design/ontap-rest.md §5).
func TestDefaultObjects(t *testing.T) {
	a := newTestSim(t, Config{SVM: "vs1"})
	c := a.must(200, "GET", "/api/cluster?fields=**", nil).body
	if dig(c, "version.generation") != float64(9) || dig(c, "version.major") != float64(15) || dig(c, "version.minor") != float64(1) {
		t.Fatalf("cluster version: %v", c)
	}
	svms := a.must(200, "GET", "/api/svm/svms?name=vs1&fields=", nil).records()
	if len(svms) != 1 {
		t.Fatalf("svms %v", svms)
	}
	svm := a.must(200, "GET", "/api/svm/svms/"+svms[0]["uuid"].(string), nil).body
	if svm["state"] != "running" || len(svm["aggregates"].([]any)) != 2 || dig(svm, "iscsi.enabled") != true || dig(svm, "nfs.enabled") != true {
		t.Fatalf("svm: %v", svm)
	}
	nodes := a.must(200, "GET", "/api/cluster/nodes?name=*&fields=serial_number,ha", nil).records()
	if len(nodes) != 2 || dig(nodes[0], "ha.enabled") != true || nodes[0]["serial_number"] == "" {
		t.Fatalf("nodes %v", nodes)
	}
	root := a.must(200, "GET", "/api/storage/volumes?is_svm_root=true&fields=nas.path,nas.export_policy.name,guarantee.type", nil).records()
	if len(root) != 1 || root[0]["name"] != "vs1_root" || dig(root[0], "nas.path") != "/" || dig(root[0], "nas.export_policy.name") != "default" {
		t.Fatalf("root volume %v", root)
	}
	pol := a.must(200, "GET", "/api/protocols/nfs/export-policies?name=default&fields=rules", nil).records()
	if len(pol) != 1 || pol[0]["id"] != float64(defaultPolicyID) || dig(pol[0]["rules"].([]any)[0], "clients") == nil {
		t.Fatalf("default policy %v", pol)
	}
	sp := a.must(200, "GET", "/api/storage/snapshot-policies?fields=name", nil).records()
	if len(sp) != 2 {
		t.Fatalf("snapshot policies %v", sp)
	}
	for _, tt := range []struct {
		service string
		want    int
	}{{"data_nfs", 1}, {"data_iscsi", 2}} {
		lifs := a.must(200, "GET", "/api/network/ip/interfaces?services="+tt.service+"&fields=ip.address,state,location.node.name", nil).records()
		if len(lifs) != tt.want {
			t.Fatalf("%s LIFs %v", tt.service, lifs)
		}
		for _, l := range lifs {
			if l["state"] != "up" || !strings.HasPrefix(dig(l, "ip.address").(string), "127.0.0.") {
				t.Fatalf("LIF %v", l)
			}
		}
	}
	svc := a.must(200, "GET", "/api/protocols/san/iscsi/services?fields=target.name,enabled", nil).records()
	if len(svc) != 1 || !strings.HasSuffix(dig(svc[0], "target.name").(string), ":vs.2") || dig(svc[0], "target.alias") != nil {
		t.Fatalf("iscsi services %v", svc)
	}
	cred := a.must(200, "GET", "/api/protocols/san/iscsi/credentials?initiator=default&fields=authentication_type", nil).records()
	if len(cred) != 1 || cred[0]["authentication_type"] != "none" {
		t.Fatalf("credentials %v", cred)
	}
	a.must(201, "POST", "/api/support/ems/application-logs?return_records=true", map[string]any{"app_version": "x", "severity": "notice"})
}
