package ontap_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap"
	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

// TestBalancedPlacement: with useBalancedPlacement and no virtual pools the
// backend offers Trident's one managed pool, and ONTAP (9.19.1+) places
// each volume through POST /application/containers, not the driver.
func TestBalancedPlacement(t *testing.T) {
	for _, driver := range []string{config.DriverONTAPNAS, config.DriverONTAPSAN} {
		t.Run(driver, func(t *testing.T) {
			b, s := simBackend(t, driver, ontapsim.Config{ONTAPVersion: "9.19.1"}, map[string]any{"useBalancedPlacement": "true"})
			pools, err := b.Pools(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			if len(pools) != 1 || pools[0].Name != ontap.ManagedPool {
				t.Fatalf("pools %+v, want only %s", pools, ontap.ManagedPool)
			}
			access := backends.AccessMount
			if driver == config.DriverONTAPSAN {
				access = backends.AccessBlock
			}
			create(t, b, "pvc-balanced", gib, access)
			v := simVolume(t, s, "trident_pvc_balanced")
			if v.Aggregate == "" {
				t.Fatalf("volume %+v has no aggregate", v)
			}
			st := s.Stats()
			if st.Count("POST", "/api/application/containers") != 1 || st.Count("POST", "/api/storage/volumes") != 0 {
				t.Errorf("requests %v: want the volume created as a container", st.Keys())
			}
			if c, err := b.Capacity(ctxT(t), ontap.ManagedPool, backends.VolumeOptions{}); err != nil || c.Available <= 0 {
				t.Errorf("capacity of the managed pool: %+v, %v", c, err)
			}
		})
	}
}

// TestBalancedPlacementPerPool: a virtual pool may ask for it on its own;
// the others keep the driver's aggregate choice.
func TestBalancedPlacementPerPool(t *testing.T) {
	b, s := simBackend(t, config.DriverONTAPNAS, ontapsim.Config{ONTAPVersion: "9.19.1"}, map[string]any{
		"storage": []any{map[string]any{}, map[string]any{"useBalancedPlacement": true}},
	})
	ctx := ctxT(t)
	for i, name := range []string{"pvc-pool0", "pvc-pool1"} {
		if _, err := b.CreateVolume(ctx, &backends.CreateRequest{Name: name, Pool: "b1_pool_" + string(rune('0'+i)), SizeBytes: gib, AccessType: backends.AccessMount}); err != nil {
			t.Fatal(err)
		}
	}
	st := s.Stats()
	if st.Count("POST", "/api/application/containers") != 1 || st.Count("POST", "/api/storage/volumes") != 1 {
		t.Errorf("requests %v: want one volume created each way", st.Keys())
	}
}

// TestBalancedPlacementNeedsONTAP9191: Trident refuses the backend on an
// older ONTAP; so does the driver, naming the key and the release.
func TestBalancedPlacementNeedsONTAP9191(t *testing.T) {
	b, _ := simBackend(t, config.DriverONTAPNAS, ontapsim.Config{ONTAPVersion: "9.15.1"}, map[string]any{"useBalancedPlacement": "true"})
	_, err := b.Pools(ctxT(t))
	if !errors.Is(err, backends.ErrUnavailable) || !strings.Contains(err.Error(), "useBalancedPlacement needs ONTAP 9.19.1 or later; the cluster runs 9.15.1") {
		t.Fatalf("err = %v", err)
	}
}

// TestSuspendedBackend: Trident's userState suspended keeps new volumes
// off the backend (clones of its volumes are not refused, as in Trident).
func TestSuspendedBackend(t *testing.T) {
	b, s := simBackend(t, config.DriverONTAPNAS, ontapsim.Config{}, map[string]any{"userState": "suspended"})
	ctx := ctxT(t)
	pools, err := b.Pools(ctx)
	if err != nil || len(pools) != 0 {
		t.Fatalf("pools %+v, %v: a suspended backend offers none", pools, err)
	}
	_, err = b.CreateVolume(ctx, &backends.CreateRequest{Name: "pvc-new", Pool: "aggr1", SizeBytes: gib, AccessType: backends.AccessMount})
	if !errors.Is(err, backends.ErrUnavailable) || !strings.Contains(err.Error(), "suspended") {
		t.Fatalf("create: %v", err)
	}
	if _, ok := s.Volume("trident_pvc_new"); ok {
		t.Fatal("a suspended backend made a volume")
	}
}
