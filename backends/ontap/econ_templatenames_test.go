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

// The economy drivers name new qtrees and LUNs by the nameTemplate, as
// Trident's NASQtreeStorageDriver.GetInternalVolumeName and
// SANEconomyStorageDriver.GetInternalVolumeName do: the name is the
// volume's internalName, a retry gets the same volume, the records' name
// finds it (VolumeAt), and volumes named before the template (Trident's
// default names) are still found. A name too long for a LUN is refused with
// nothing made; one too long for a qtree falls back to the naming rule, as
// in Trident.
func TestNameTemplateNamesEconomyVolumes(t *testing.T) {
	const (
		pv0 = "pvc-0f0f0f0f-0000-4000-8000-000000000000" // made before the template
		pv1 = "pvc-5e0c8a43-1b2d-4c6e-9f70-8a9b0c1d2e3f"
		pv2 = "pvc-5e0c8fff-0000-4000-8000-000000000000" // same first five hex digits
	)
	claim := backends.Claim{Name: "data-0", Namespace: "apps", StorageClass: "gold"}
	for _, driver := range []string{config.DriverONTAPNASEconomy, config.DriverONTAPSANEconomy} {
		t.Run(driver, func(t *testing.T) {
			s, err := ontapsim.New(ontapsim.Config{})
			must(t, err)
			t.Cleanup(func() { s.Close() })
			_, err = s.Start("127.0.0.1:0", true)
			must(t, err)
			plain, _ := simBackendOn(t, s, driver, nil)
			b, _ := simBackendOn(t, s, driver, map[string]any{
				"labels":   map[string]string{"cluster": "Prod-1"},
				"defaults": map[string]any{"nameTemplate": "{{.labels.cluster}}_{{.volume.Namespace}}_{{.volume.RequestName}}"},
			})
			ctx := ctxT(t)
			pools, err := b.Pools(ctx)
			must(t, err)
			req := func(id string, c backends.Claim) *backends.CreateRequest {
				r := &backends.CreateRequest{Name: id, Pool: pools[0].Name, SizeBytes: gib, AccessType: backends.AccessMount, Claim: c}
				if driver == config.DriverONTAPSANEconomy {
					r.AccessType, r.FSType = backends.AccessBlock, backends.FSTypeRaw
				}
				return r
			}
			members := func() []string {
				var names []string
				if driver == config.DriverONTAPNASEconomy {
					for _, q := range s.Qtrees() {
						names = append(names, q.Name)
					}
				} else {
					for _, l := range s.LUNs() {
						names = append(names, l.Path[strings.LastIndex(l.Path, "/")+1:])
					}
				}
				slices.Sort(names)
				return names
			}
			old, err := plain.CreateVolume(ctx, req(pv0, claim))
			must(t, err)
			const internal = "Prod_1_apps_data_0_5e0c8"
			v, err := b.CreateVolume(ctx, req(pv1, claim))
			if err != nil || v.Context["internalName"] != internal {
				t.Fatalf("create: %v %+v; want internalName %s", err, v, internal)
			}
			if got := members(); !slices.Contains(got, internal) || len(got) != 2 {
				t.Fatalf("on ONTAP: %v, want %s and the earlier volume's", got, internal)
			}
			// A retry renders the same name and gets the same volume.
			again, err := b.CreateVolume(ctx, req(pv1, claim))
			if err != nil || again.Context["internalName"] != internal || again.ID != pv1 || len(members()) != 2 {
				t.Fatalf("retry: %v %+v, members %v", err, again, members())
			}
			// The records' name finds it, by a new controller too; the
			// naming rule does not.
			for _, c := range []backends.Backend{b, plain} {
				found, err := c.(backends.VolumeLocator).VolumeAt(ctx, pv1, internal)
				if err != nil || found.ID != pv1 || found.SizeBytes != gib || found.Context["internalName"] != internal {
					t.Errorf("VolumeAt: %v %+v", err, found)
				}
			}
			if _, err := b.Volume(ctx, pv1); !errors.Is(err, backends.ErrNotFound) {
				t.Errorf("the naming rule found %s: %v", pv1, err)
			}
			// The volume made before the template: found by the naming
			// rule and at its internalName (Trident's default name).
			for what, find := range map[string]func() (*backends.Volume, error){
				"naming rule": func() (*backends.Volume, error) { return b.Volume(ctx, pv0) },
				"internalName": func() (*backends.Volume, error) {
					return b.(backends.VolumeLocator).VolumeAt(ctx, pv0, old.Context["internalName"])
				},
			} {
				if got, err := find(); err != nil || got.ID != pv0 || got.SizeBytes != gib {
					t.Errorf("earlier volume by its %s: %v %+v", what, err, got)
				}
			}
			for _, bad := range []string{"", "../vol", "x*", strings.Repeat("a", 300)} {
				if _, err := b.(backends.VolumeLocator).VolumeAt(ctx, pv1, bad); !errors.Is(err, backends.ErrNotFound) {
					t.Errorf("VolumeAt %q: %v, want ErrNotFound", bad, err)
				}
			}
			// Another claim of the same name whose UID starts alike, of
			// another size: not given the first one's volume.
			other := req(pv2, claim)
			other.SizeBytes = 2 * gib
			if _, err := b.CreateVolume(ctx, other); !errors.Is(err, backends.ErrAlreadyExists) {
				t.Errorf("second claim rendering %s: %v, want ErrAlreadyExists", internal, err)
			}
			// Without the claim's name nothing is created.
			before := members()
			if _, err := b.CreateVolume(ctx, req("pvc-11111111-0000-4000-8000-000000000000", backends.Claim{})); !errors.Is(err, backends.ErrInvalid) {
				t.Errorf("create without the claim: %v, want ErrInvalid", err)
			}
			if got := members(); !slices.Equal(got, before) {
				t.Errorf("created without the claim: %v", got)
			}
			// A claim name that renders more than a qtree or LUN name holds.
			long := claim
			long.Name = strings.Repeat("x", 260)
			const pvLong = "pvc-22222222-0000-4000-8000-000000000000"
			v, err = b.CreateVolume(ctx, req(pvLong, long))
			switch driver {
			case config.DriverONTAPSANEconomy:
				if !errors.Is(err, backends.ErrInvalid) {
					t.Errorf("create with a 260-character claim name: %v, want ErrInvalid", err)
				}
				if got := members(); !slices.Equal(got, before) {
					t.Errorf("a LUN was made under a name too long for ONTAP: %v", got)
				}
			default:
				// Trident: "Custom volume name length ... is exceeding
				// the 64 character limit", and the default name.
				if err != nil || v.Context["internalName"] != "trident_pvc_22222222_0000_4000_8000_000000000000" {
					t.Errorf("create with a 260-character claim name: %v %+v, want the naming rule's qtree", err, v)
				}
			}
			// ListVolumes: the templated volume under its ID.
			list, err := b.ListVolumes(ctx)
			must(t, err)
			var ids []string
			for _, lv := range list {
				ids = append(ids, lv.ID+"@"+lv.Context["internalName"])
			}
			if driver == config.DriverONTAPSANEconomy && !slices.Contains(ids, pv1+"@"+internal) {
				t.Errorf("ListVolumes: %v, want %s@%s", ids, pv1, internal)
			}
			// Deleting it leaves the others.
			found, err := b.(backends.VolumeLocator).VolumeAt(ctx, pv1, internal)
			must(t, err)
			must(t, b.DeleteVolume(ctx, found))
			if got := members(); slices.Contains(got, internal) || !slices.Contains(got, old.Context["internalName"]) {
				t.Errorf("after the delete: %v", got)
			}
		})
	}
}
