package ontap_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

// requestsOf runs f and returns the requests it sent, by endpoint.
func requestsOf(t *testing.T, s *ontapsim.Simulator, f func() error) map[string]int64 {
	t.Helper()
	before := s.Stats()
	if err := f(); err != nil {
		t.Fatal(err)
	}
	after := s.Stats()
	out := map[string]int64{}
	for _, k := range after.Keys() {
		if d := after.Endpoints[k].Requests - before.Endpoints[k].Requests; d > 0 {
			out[k] = d
		}
	}
	return out
}

// An ontap-nas publish with autoExportPolicy makes the volume's policy
// with the node's rule in one request; later publishes and unpublishes
// read the policy with its rules in one.
func TestNASPublishRequests(t *testing.T) {
	const (
		policies = "/api/protocols/nfs/export-policies"
		rules    = policies + "/{policy.id}/rules"
	)
	b, s := simBackend(t, config.DriverONTAPNAS, ontapsim.Config{}, map[string]any{
		"autoExportPolicy": true, "autoExportCIDRs": []string{"10.0.0.0/8"},
	})
	ctx := ctxT(t)
	vol := create(t, b, "pvc-r", gib, backends.AccessMount)
	vol = lookup(t, b, vol.ID)
	n1 := backends.Node{Name: "n1", IPs: []string{"10.1.1.1"}}
	n2 := backends.Node{Name: "n2", IPs: []string{"10.2.2.2"}}
	publish := func(n backends.Node) func() error {
		return func() error {
			_, err := b.Publish(ctx, vol, &backends.PublishRequest{Node: n, AccessType: backends.AccessMount})
			return err
		}
	}
	unpublish := func(n backends.Node) func() error {
		return func() error { return b.Unpublish(ctx, vol, n.Name, &n) }
	}
	for _, step := range []struct {
		name  string
		call  func() error
		want  map[string]int64
		rules []string // the policy's afterwards (ruleSummary)
	}{
		{"first publish", publish(n1), map[string]int64{
			"POST " + policies: 1, "PATCH /api/storage/volumes/{uuid}": 1,
		}, []string{"10.1.1.1:any"}},
		{"publish again", publish(n1), map[string]int64{"GET " + policies: 1}, []string{"10.1.1.1:any"}},
		{"second node", publish(n2), map[string]int64{"GET " + policies: 1, "POST " + rules: 1},
			[]string{"10.1.1.1:any", "10.2.2.2:any"}},
		{"unpublish one", unpublish(n1), map[string]int64{"GET " + policies: 1, "DELETE " + rules + "/{index}": 1},
			[]string{"10.2.2.2:any"}},
		{"unpublish the last", unpublish(n2), map[string]int64{
			"GET " + policies: 1, "DELETE " + rules + "/{index}": 1, "PATCH /api/storage/volumes/{uuid}": 1,
			"DELETE " + policies + "/{id}": 1,
		}, nil},
	} {
		if got := requestsOf(t, s, step.call); !maps.Equal(got, step.want) {
			t.Errorf("%s: requests %v, want %v", step.name, got, step.want)
		}
		if got := ruleSummary(s, "trident_pvc_r"); !slices.Equal(got, step.rules) {
			t.Errorf("%s: rules %v, want %v", step.name, got, step.rules)
		}
	}
}

// An ontap-san create sets Trident's LUN attributes in the LUN's POST.
func TestSANCreateRequests(t *testing.T) {
	b, s := simBackend(t, config.DriverONTAPSAN, ontapsim.Config{}, nil)
	create(t, b, "pvc-warm", gib, backends.AccessMount) // connects
	pools, err := b.Pools(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	got := requestsOf(t, s, func() error {
		_, err := b.CreateVolume(ctxT(t), &backends.CreateRequest{Name: "pvc-c", Pool: pools[0].Name, SizeBytes: gib, AccessType: backends.AccessMount, FSType: "xfs"})
		return err
	})
	want := map[string]int64{"POST /api/storage/volumes": 1, "POST /api/storage/luns": 1}
	if !maps.Equal(got, want) {
		t.Errorf("requests %v, want %v", got, want)
	}
	luns := s.LUNs()
	i := slices.IndexFunc(luns, func(l ontapsim.LUNInfo) bool { return l.Path == "/vol/trident_pvc_c/lun0" })
	if i < 0 || luns[i].Attributes["com.netapp.ndvp.fstype"] != "xfs" || luns[i].Attributes["context"] != "csi" {
		t.Errorf("LUNs %+v", luns)
	}
}
