package ontap_test

import (
	"errors"
	"testing"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

// Volumes Trident named otherwise than storagePrefix + PV name — with a
// nameTemplate, imported with --no-rename, made under an older
// storagePrefix — are found at the name their records give (VolumeAt),
// and served there: expanded and deleted.
func TestVolumeAtInternalName(t *testing.T) {
	const pv = "pvc-5e0c8a43-1b2d-4c6e-9f70-8a9b0c1d2e3f"
	for _, driver := range []string{config.DriverONTAPNAS, config.DriverONTAPSAN} {
		t.Run(driver, func(t *testing.T) {
			b, s := simBackend(t, driver, ontapsim.Config{}, nil)
			ctx := ctxT(t)
			for _, name := range []string{"apps_data_5e0c8a43", "legacy_pvc_5e0c8a43_1b2d_4c6e_9f70_8a9b0c1d2e3f"} {
				_, err := s.CreateVolume(ontapsim.VolumeSpec{Name: name, Size: 2 * gib, Thin: true,
					Comment: `{"provisioning":{"cluster":"prod"}}`})
				must(t, err)
				if driver == config.DriverONTAPSAN {
					_, err = s.CreateLUN(ontapsim.LUNSpec{Path: "/vol/" + name + "/lun0", Size: gib})
					must(t, err)
				}
			}
			// Ours, for another PV: its name is not a way to reach it.
			other := create(t, b, "pvc-other", gib, backends.AccessMount)
			loc := b.(backends.VolumeLocator)
			for _, tc := range []struct {
				name, internal string
				found          bool
			}{
				{"nameTemplate", "apps_data_5e0c8a43", true},
				{"old storagePrefix", "legacy_pvc_5e0c8a43_1b2d_4c6e_9f70_8a9b0c1d2e3f", true},
				{"another PV's volume", other.Context["internalName"], false},
				{"no such volume", "apps_gone", false},
				{"not an ONTAP name", "../vol", false},
				{"empty", "", false},
			} {
				v, err := loc.VolumeAt(ctx, pv, tc.internal)
				switch {
				case tc.found && err != nil:
					t.Errorf("%s: %v", tc.name, err)
				case tc.found && (v.ID != pv || v.Context["internalName"] != tc.internal || v.SizeBytes == 0):
					t.Errorf("%s: %+v", tc.name, v)
				case !tc.found && !errors.Is(err, backends.ErrNotFound):
					t.Errorf("%s: %v, %+v; want ErrNotFound", tc.name, err, v)
				}
			}
			if _, err := b.Volume(ctx, pv); !errors.Is(err, backends.ErrNotFound) {
				t.Errorf("the naming rule found %s: %v", pv, err)
			}
			v, err := loc.VolumeAt(ctx, pv, "apps_data_5e0c8a43")
			must(t, err)
			if _, err := b.ExpandVolume(ctx, v, 3*gib); err != nil {
				t.Errorf("expand: %v", err)
			}
			must(t, b.DeleteVolume(ctx, v))
			if _, ok := s.Volume("apps_data_5e0c8a43"); ok {
				t.Error("deleted volume still on ONTAP")
			}
			if _, ok := s.Volume("legacy_pvc_5e0c8a43_1b2d_4c6e_9f70_8a9b0c1d2e3f"); !ok {
				t.Error("deleting one volume took the other")
			}
		})
	}
}
