package ontap_test

import (
	"errors"
	"testing"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

func groupSnapshotter(t *testing.T, b backends.Backend) backends.GroupSnapshotter {
	t.Helper()
	return as[backends.GroupSnapshotter](t, b)
}

// TestGroupSnapshot: one ONTAP consistency-group snapshot covers every
// member at the same instant, leaves no group behind, is found again by a
// repeated call, and each member snapshot restores on its own.
func TestGroupSnapshot(t *testing.T) {
	for _, driver := range []string{config.DriverONTAPNAS, config.DriverONTAPSAN} {
		t.Run(driver, func(t *testing.T) {
			b, s := simBackend(t, driver, ontapsim.Config{}, nil)
			access := backends.AccessMount
			if driver == config.DriverONTAPSAN {
				access = backends.AccessBlock
			}
			vols := []*backends.Volume{create(t, b, "pvc-a", gib, access), create(t, b, "pvc-b", gib, access)}
			g := groupSnapshotter(t, b)
			var first []*backends.Snapshot
			for i := range 2 {
				snaps, err := g.CreateGroupSnapshot(ctxT(t), vols, "groupsnapshot-1")
				if err != nil {
					t.Fatalf("call %d: %v", i+1, err)
				}
				if len(snaps) != 2 || snaps[0].VolumeID != "pvc-a" || snaps[1].VolumeID != "pvc-b" || !snaps[0].CreatedAt.Equal(snaps[1].CreatedAt) {
					t.Fatalf("call %d: %+v", i+1, snaps)
				}
				if first == nil {
					first = snaps
				} else if snaps[0].Name != first[0].Name {
					t.Fatalf("repeated call took new snapshots %s", snaps[0].Name)
				}
			}
			if n := len(s.Snapshots(vols[0].Context["internalName"])); n != 1 {
				t.Errorf("%d snapshots of pvc-a, want 1", n)
			}
			if st, _, _ := s.Do("GET", "/api/application/consistency-groups", nil); st != 200 || cgCount(t, s) != 0 {
				t.Errorf("consistency groups left: %d", cgCount(t, s))
			}
			pools, _ := b.Pools(ctxT(t))
			restored, err := b.CreateVolume(ctxT(t), &backends.CreateRequest{Name: "pvc-r", Pool: pools[0].Name, SizeBytes: gib,
				AccessType: access, FSType: map[bool]string{true: backends.FSTypeRaw}[access == backends.AccessBlock],
				Source: &backends.Source{Snapshot: first[1]}})
			if err != nil || restored.SourceSnapshotID != "pvc-b/"+first[1].Name {
				t.Fatalf("restore from a member snapshot: %+v, %v", restored, err)
			}
		})
	}
}

func cgCount(t *testing.T, s *ontapsim.Simulator) int {
	t.Helper()
	_, body, err := s.Do("GET", "/api/application/consistency-groups", nil)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := body["num_records"].(float64)
	return int(n)
}

// TestGroupSnapshotRefusals: nothing is taken when a member already has
// the name, when a member is in an administrator's consistency group, or
// when ONTAP predates consistency groups.
func TestGroupSnapshotRefusals(t *testing.T) {
	b, s := simBackend(t, config.DriverONTAPNAS, ontapsim.Config{}, nil)
	vols := []*backends.Volume{create(t, b, "pvc-a", gib, backends.AccessMount), create(t, b, "pvc-b", gib, backends.AccessMount)}
	g := groupSnapshotter(t, b)
	if _, err := b.CreateSnapshot(ctxT(t), vols[1], "taken"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.CreateGroupSnapshot(ctxT(t), vols, "taken"); !errors.Is(err, backends.ErrAlreadyExists) {
		t.Errorf("name taken on one member: %v, want ErrAlreadyExists", err)
	}
	if n := len(s.Snapshots(vols[0].Context["internalName"])); n != 0 {
		t.Errorf("refused group snapshot left %d snapshots on pvc-a", n)
	}
	if _, _, err := s.Do("POST", "/api/application/consistency-groups?return_timeout=30", map[string]any{
		"name": "admins", "svm": map[string]any{"name": s.Info().SVM},
		"volumes": []any{map[string]any{"name": vols[0].Context["internalName"], "provisioning_options": map[string]any{"action": "add"}}},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.CreateGroupSnapshot(ctxT(t), vols, "other"); !errors.Is(err, backends.ErrInUse) {
		t.Errorf("member in another group: %v, want ErrInUse", err)
	}
	if cgCount(t, s) != 1 || len(s.Snapshots(vols[1].Context["internalName"])) != 1 {
		t.Errorf("refused group snapshot changed ONTAP")
	}

	old, _ := simBackend(t, config.DriverONTAPNAS, ontapsim.Config{ONTAPVersion: "9.9.1"}, nil)
	ov := []*backends.Volume{create(t, old, "pvc-a", gib, backends.AccessMount)}
	if _, err := groupSnapshotter(t, old).CreateGroupSnapshot(ctxT(t), ov, "g"); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("ONTAP 9.9.1: %v, want ErrInvalid", err)
	}
	eco, _ := simBackend(t, config.DriverONTAPNASEconomy, ontapsim.Config{}, nil)
	if _, err := groupSnapshotter(t, eco).CreateGroupSnapshot(ctxT(t), nil, "g"); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("economy: %v, want ErrInvalid", err)
	}
}
