package ontap

import (
	"testing"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/rest"
)

// ruleAdmits decides from the client match and the access a rule grants.
func TestRuleAdmits(t *testing.T) {
	ips := []string{"10.1.1.1", "fd00::1"}
	for _, tc := range []struct {
		name string
		rule rest.ExportRule
		want bool
	}{
		{"exact address", rest.ExportRule{Clients: []string{"10.1.1.1"}}, true},
		{"another address", rest.ExportRule{Clients: []string{"10.1.1.2"}}, false},
		{"one of several", rest.ExportRule{Clients: []string{"10.9.9.9", "fd00::1"}}, true},
		{"subnet", rest.ExportRule{Clients: []string{"10.1.0.0/16"}}, true},
		{"subnet with host bits", rest.ExportRule{Clients: []string{"10.1.7.7/16"}}, true},
		{"other subnet", rest.ExportRule{Clients: []string{"10.2.0.0/16"}}, false},
		{"everyone", rest.ExportRule{Clients: []string{"0.0.0.0/0"}}, true},
		{"mapped IPv4", rest.ExportRule{Clients: []string{"::ffff:10.1.1.1"}}, true},
		{"host name: not judged", rest.ExportRule{Clients: []string{"worker-1.example.com"}}, false},
		{"netgroup: not judged", rest.ExportRule{Clients: []string{"@workers"}}, false},
		{"no clients", rest.ExportRule{}, false},
		{"read-only", rest.ExportRule{Clients: []string{"10.1.1.1"}, RWRule: []string{"never"}, RORule: []string{"sys"}}, true},
		{"no access", rest.ExportRule{Clients: []string{"10.1.1.1"}, RWRule: []string{"never"}, RORule: []string{"never"}}, false},
		{"CIFS only", rest.ExportRule{Clients: []string{"10.1.1.1"}, Protocols: []string{"cifs"}}, false},
		{"NFSv4", rest.ExportRule{Clients: []string{"10.1.1.1"}, Protocols: []string{"nfs4"}}, true},
		{"any protocol", rest.ExportRule{Clients: []string{"10.1.1.1"}, Protocols: []string{"any"}}, true},
	} {
		if got := ruleAdmits(tc.rule, nodeAddrs(&backends.Node{IPs: ips})); got != tc.want {
			t.Errorf("%s: %+v admits %v: %v, want %v", tc.name, tc.rule, ips, got, tc.want)
		}
	}
}
