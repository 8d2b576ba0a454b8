package ontap_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

func sp[T any](v T) *T { return &v }

// as is b as the optional interface T, which it must implement.
func as[T any](t *testing.T, b backends.Backend) T {
	t.Helper()
	x, ok := b.(T)
	if !ok {
		t.Fatalf("%s does not implement %T", b.Driver(), (*T)(nil))
	}
	return x
}

func modifier(t *testing.T, b backends.Backend) backends.Modifier {
	t.Helper()
	return as[backends.Modifier](t, b)
}

// patches counts the PATCHes of volumes and LUNs since before.
func patches(s *ontapsim.Simulator, before ontapsim.Stats) int64 {
	after := s.Stats()
	n := int64(0)
	for _, ep := range []string{"/api/storage/volumes/{uuid}", "/api/storage/luns/{uuid}"} {
		n += after.Count("PATCH", ep) - before.Count("PATCH", ep)
	}
	return n
}

// TestModifyVolume: each change lands on ONTAP in one PATCH; the same
// change again sends none; every refusal leaves ONTAP as it was.
func TestModifyVolume(t *testing.T) {
	for _, driver := range []string{config.DriverONTAPNAS, config.DriverONTAPSAN} {
		t.Run(driver, func(t *testing.T) {
			b, s := simBackend(t, driver, ontapsim.Config{}, nil)
			if err := s.CreateQoSPolicy("gold", false, 5000); err != nil {
				t.Fatal(err)
			}
			if _, err := s.CreateExportPolicy("custom"); err != nil {
				t.Fatal(err)
			}
			access := backends.AccessMount
			if driver == config.DriverONTAPSAN {
				access = backends.AccessBlock
			}
			vol := create(t, b, "pvc-1", gib, access)
			name := vol.Context["internalName"]
			mod := modifier(t, b)
			before := simVolume(t, s, name)
			assertRefusals(t, b, s, vol.ID, name)

			m := backends.Modify{QoSPolicy: sp("gold"), SnapshotPolicy: sp("none"), SnapshotReserve: sp(20), TieringPolicy: sp("auto")}
			if driver == config.DriverONTAPNAS {
				m.SnapshotDir, m.UnixPermissions, m.ExportPolicy = sp(false), sp("---rwxr-x---"), sp("custom")
			}
			wantPatches := int64(1)
			if driver == config.DriverONTAPSAN {
				wantPatches = 2 // the FlexVol, and the LUN's QoS group
			}
			for i, want := range []int64{wantPatches, 0} {
				st := s.Stats()
				if err := mod.ModifyVolume(ctxT(t), lookup(t, b, vol.ID), &m); err != nil {
					t.Fatalf("modify #%d: %v", i+1, err)
				}
				if n := patches(s, st); n != want {
					t.Errorf("modify #%d: %d PATCHes, want %d", i+1, n, want)
				}
			}
			v := simVolume(t, s, name)
			if v.SnapshotPolicy != "none" || v.ReservePercent != 20 || v.TieringPolicy != "auto" {
				t.Errorf("volume after modify: %+v", v)
			}
			// The FlexVol grew so that the volume's size stays usable
			// beside the larger reserve.
			if usable := v.Size * 80 / 100; usable < gib || v.Size <= before.Size {
				t.Errorf("FlexVol %d bytes (was %d): %d usable, want at least %d", v.Size, before.Size, usable, gib)
			}
			if driver == config.DriverONTAPNAS {
				if v.QoSPolicy != "gold" || v.SnapdirAccess || v.UnixPermissions != 750 || v.ExportPolicy != "custom" {
					t.Errorf("NAS attributes after modify: %+v", v)
				}
				return
			}
			if v.QoSPolicy != "" {
				t.Errorf("ontap-san put the FlexVol in QoS group %q; the LUN holds it", v.QoSPolicy)
			}
			if luns := s.LUNs(); len(luns) != 1 || luns[0].QoSPolicy != "gold" {
				t.Errorf("LUN after modify: %+v", luns)
			}
			if err := mod.CheckModify(&backends.Modify{UnixPermissions: sp("0700")}); !errors.Is(err, backends.ErrInvalid) {
				t.Errorf("unixPermissions on ontap-san: %v, want ErrInvalid", err)
			}
		})
	}
}

// assertRefusals: each change naming what ONTAP lacks is refused with
// ErrInvalid, without a PATCH, and the volume stays as it was.
func assertRefusals(t *testing.T, b backends.Backend, s *ontapsim.Simulator, id, name string) {
	t.Helper()
	mod := modifier(t, b)
	before := simVolume(t, s, name)
	refusals := []struct {
		name string
		m    backends.Modify
	}{
		{"QoS group that does not exist", backends.Modify{QoSPolicy: sp("tin"), SnapshotPolicy: sp("none")}},
		{"adaptive group as qosPolicy", backends.Modify{QoSPolicy: sp("extreme"), SnapshotPolicy: sp("none")}},
		{"fixed group as adaptiveQosPolicy", backends.Modify{AdaptiveQoSPolicy: sp("gold"), SnapshotPolicy: sp("none")}},
		{"snapshot policy that does not exist", backends.Modify{SnapshotPolicy: sp("hourly-42"), QoSPolicy: sp("gold")}},
		{"export policy that does not exist", backends.Modify{ExportPolicy: sp("nope"), QoSPolicy: sp("gold")}},
	}
	for _, r := range refusals {
		st := s.Stats()
		err := mod.CheckModify(&r.m)
		if err == nil {
			err = mod.ModifyVolume(ctxT(t), lookup(t, b, id), &r.m)
		}
		if !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", r.name, err)
		}
		if n := patches(s, st); n != 0 {
			t.Errorf("%s: %d PATCHes sent", r.name, n)
		}
		if after := simVolume(t, s, name); !reflect.DeepEqual(after, before) {
			t.Errorf("%s changed the volume:\n%+v\nwas\n%+v", r.name, after, before)
		}
	}
}

// TestModifyVolumeRemovesQoS: "none" takes a volume out of its group.
func TestModifyVolumeRemovesQoS(t *testing.T) {
	b, s := simBackend(t, config.DriverONTAPNAS, ontapsim.Config{}, nil)
	vol := create(t, b, "pvc-1", gib, backends.AccessMount)
	mod := modifier(t, b)
	for _, q := range []string{"extreme", backends.QoSNone} {
		m := &backends.Modify{AdaptiveQoSPolicy: sp(q)}
		if q == backends.QoSNone {
			m = &backends.Modify{QoSPolicy: sp(q)}
		}
		if err := mod.ModifyVolume(ctxT(t), lookup(t, b, vol.ID), m); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if v := simVolume(t, s, vol.Context["internalName"]); v.QoSPolicy != "" {
		t.Fatalf("QoS group %q after none", v.QoSPolicy)
	}
}

// TestModifyVolumeRefusedByConfig: what the backend's configuration owns,
// and economy volumes, cannot change.
func TestModifyVolumeRefusedByConfig(t *testing.T) {
	b, _ := simBackend(t, config.DriverONTAPNAS, ontapsim.Config{}, map[string]any{"autoExportPolicy": true})
	if err := modifier(t, b).CheckModify(&backends.Modify{ExportPolicy: sp("custom")}); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("exportPolicy with autoExportPolicy: %v, want ErrInvalid", err)
	}
	if err := modifier(t, b).CheckModify(&backends.Modify{UnixPermissions: sp("rwx")}); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("bad permissions: %v, want ErrInvalid", err)
	}
	for _, driver := range []string{config.DriverONTAPNASEconomy, config.DriverONTAPSANEconomy} {
		b, _ := simBackend(t, driver, ontapsim.Config{}, nil)
		if err := modifier(t, b).CheckModify(&backends.Modify{QoSPolicy: sp("gold")}); !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", driver, err)
		}
	}
}
