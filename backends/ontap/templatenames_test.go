package ontap_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

// A nameTemplate names new FlexVols of ontap-nas and ontap-san (a virtual
// pool's over the backend's); the name is the volume's internalName and
// its record, so the volume is found there, listed, and a second claim
// whose name renders the same is refused, not given the first one's volume.
func TestNameTemplateNamesNewVolumes(t *testing.T) {
	const (
		pv1 = "pvc-5e0c8a43-1b2d-4c6e-9f70-8a9b0c1d2e3f"
		pv2 = "pvc-5e0c8fff-0000-4000-8000-000000000000" // same first five hex digits
		pv3 = "pvc-0a1b2c3d-0000-4000-8000-000000000000"
	)
	claim := backends.Claim{Name: "data-0", Namespace: "apps", StorageClass: "gold"}
	for _, driver := range []string{config.DriverONTAPNAS, config.DriverONTAPSAN} {
		t.Run(driver, func(t *testing.T) {
			b, s := simBackend(t, driver, ontapsim.Config{}, map[string]any{
				"labels":   map[string]string{"cluster": "Prod-1"},
				"defaults": map[string]any{"nameTemplate": "{{.labels.cluster}}_{{.volume.Namespace}}_{{.volume.RequestName}}"},
				"storage": []any{
					map[string]any{},
					map[string]any{"defaults": map[string]any{"nameTemplate": "{{.volume.StorageClass}}_{{.config.BackendName}}_{{.volume.Name}}"}},
				},
			})
			ctx := ctxT(t)
			pools, err := b.Pools(ctx)
			must(t, err)
			pool := func(name string) string {
				i := slices.IndexFunc(pools, func(p backends.Pool) bool { return p.Name == name })
				if i < 0 {
					t.Fatalf("no pool %s in %v", name, pools)
				}
				return pools[i].Name
			}
			req := func(id, pool string, c backends.Claim) *backends.CreateRequest {
				r := &backends.CreateRequest{Name: id, Pool: pool, SizeBytes: gib, AccessType: backends.AccessMount, Claim: c}
				if driver == config.DriverONTAPSAN {
					r.AccessType, r.FSType = backends.AccessBlock, backends.FSTypeRaw
				}
				return r
			}
			for _, tc := range []struct {
				id, pool, internal string
			}{
				{pv1, pool("b1_pool_0"), "Prod_1_apps_data_0_5e0c8"},
				{pv3, pool("b1_pool_1"), "gold_b1_pvc_0a1b2c3d_0000_4000_8000_000000000000"},
			} {
				v, err := b.CreateVolume(ctx, req(tc.id, tc.pool, claim))
				if err != nil {
					t.Fatalf("create %s: %v", tc.id, err)
				}
				if v.Context["internalName"] != tc.internal {
					t.Errorf("%s: internalName %q, want %q", tc.id, v.Context["internalName"], tc.internal)
				}
				if _, ok := s.Volume(tc.internal); !ok {
					t.Fatalf("%s: no FlexVol %s on ONTAP", tc.id, tc.internal)
				}
				// A retry renders the same name and gets the same volume.
				again, err := b.CreateVolume(ctx, req(tc.id, tc.pool, claim))
				if err != nil || again.Context["internalName"] != tc.internal {
					t.Fatalf("retry of %s: %v %+v", tc.id, err, again)
				}
				// The records' name finds it; the naming rule does not.
				found, err := b.(backends.VolumeLocator).VolumeAt(ctx, tc.id, tc.internal)
				if err != nil || found.ID != tc.id || found.SizeBytes != gib {
					t.Errorf("VolumeAt %s: %v %+v", tc.id, err, found)
				}
				if _, err := b.Volume(ctx, tc.id); !errors.Is(err, backends.ErrNotFound) {
					t.Errorf("the naming rule found %s: %v", tc.id, err)
				}
			}
			// A clone is named by the template too; deleting it removes
			// the snapshot of the parent it was made from.
			parent, err := b.(backends.VolumeLocator).VolumeAt(ctx, pv1, "Prod_1_apps_data_0_5e0c8")
			must(t, err)
			cr := req("pvc-c10ec10e-0000-4000-8000-000000000000", pool("b1_pool_0"), backends.Claim{Name: "copy", Namespace: "apps"})
			cr.Source = &backends.Source{Volume: parent}
			clone, err := b.CreateVolume(ctx, cr)
			if err != nil || clone.Context["internalName"] != "Prod_1_apps_copy_c10ec" {
				t.Fatalf("clone: %v %+v", err, clone)
			}
			if v, _ := s.Volume("Prod_1_apps_data_0_5e0c8"); !slices.Contains(v.Snapshots, "Prod_1_apps_copy_c10ec") {
				t.Errorf("clone's snapshot of its parent: %v", v.Snapshots)
			}
			clone, err = b.(backends.VolumeLocator).VolumeAt(ctx, cr.Name, "Prod_1_apps_copy_c10ec")
			must(t, err)
			must(t, b.DeleteVolume(ctx, clone))
			if v, _ := s.Volume("Prod_1_apps_data_0_5e0c8"); len(v.Snapshots) != 0 {
				t.Errorf("snapshots left on the parent after the clone's delete: %v", v.Snapshots)
			}
			// Another claim of the same name whose UID starts alike.
			if _, err := b.CreateVolume(ctx, req(pv2, pool("b1_pool_0"), claim)); !errors.Is(err, backends.ErrAlreadyExists) {
				t.Errorf("second claim rendering Prod_1_apps_data_0_5e0c8: %v, want ErrAlreadyExists", err)
			}
			// A retry asking for another size is not answered with the volume.
			bigger := req(pv1, pool("b1_pool_0"), claim)
			bigger.SizeBytes = 2 * gib
			if _, err := b.CreateVolume(ctx, bigger); !errors.Is(err, backends.ErrAlreadyExists) {
				t.Errorf("retry with another size: %v, want ErrAlreadyExists", err)
			}
			// Without the claim's name nothing is created.
			before := len(s.Volumes())
			_, err = b.CreateVolume(ctx, req("pvc-11111111-0000-4000-8000-000000000000", pool("b1_pool_0"), backends.Claim{}))
			if !errors.Is(err, backends.ErrInvalid) {
				t.Errorf("create without the claim: %v, want ErrInvalid", err)
			}
			if len(s.Volumes()) != before {
				t.Error("a volume was created without the claim")
			}
			// A claim name that renders a name longer than ONTAP allows:
			// refused before ONTAP is asked, nothing created.
			long := claim
			long.Name = strings.Repeat("x", 250)
			got := requestsOf(t, s, func() error {
				_, err = b.CreateVolume(ctx, req("pvc-22222222-0000-4000-8000-000000000000", pool("b1_pool_0"), long))
				return nil
			})
			if !errors.Is(err, backends.ErrInvalid) {
				t.Errorf("create with a 250-character claim name: %v, want ErrInvalid", err)
			}
			for ep, n := range got {
				if strings.HasPrefix(ep, "POST ") && n > 0 {
					t.Errorf("%d × %s for a name ONTAP would refuse", n, ep)
				}
			}
			if len(s.Volumes()) != before {
				t.Error("a volume was created under a name too long for ONTAP")
			}
			list, err := b.ListVolumes(ctx)
			must(t, err)
			var ids []string
			for _, v := range list {
				ids = append(ids, v.ID+"@"+v.Context["internalName"])
			}
			slices.Sort(ids)
			want := []string{pv3 + "@gold_b1_pvc_0a1b2c3d_0000_4000_8000_000000000000", pv1 + "@Prod_1_apps_data_0_5e0c8"}
			slices.Sort(want)
			if !slices.Equal(ids, want) {
				t.Errorf("ListVolumes: %v, want %v", ids, want)
			}
		})
	}
}
