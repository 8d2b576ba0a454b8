package ontap_test

import (
	"testing"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

// A volume created with SkipRecoveryQueue (Trident's per-claim annotation)
// is deleted as it asked, whatever the pool's default: DeleteVolume has
// only the volume to go by, so the choice is recorded with it.
func TestSkipRecoveryQueuePerVolume(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		name      string
		poolSkips bool
		option    *bool
		wantQueue bool
	}{
		{"pool default keeps", false, nil, true},
		{"claim skips", false, &yes, false},
		{"claim keeps over pool", true, &no, true},
		{"pool default skips", true, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var extra map[string]any
			if tc.poolSkips {
				extra = map[string]any{"defaults": map[string]any{"skipRecoveryQueue": "true"}}
			}
			b, s := simBackend(t, config.DriverONTAPNAS, ontapsim.Config{}, extra)
			ctx := ctxT(t)
			pools, err := b.Pools(ctx)
			if err != nil {
				t.Fatal(err)
			}
			vol, err := b.CreateVolume(ctx, &backends.CreateRequest{Name: "pvc-1", Pool: pools[0].Name, SizeBytes: gib,
				AccessType: backends.AccessMount, Options: backends.VolumeOptions{SkipRecoveryQueue: tc.option}})
			if err != nil {
				t.Fatal(err)
			}
			// Found again, as by a restarted controller: the choice is on ONTAP.
			if vol, err = b.Volume(ctx, "pvc-1"); err != nil {
				t.Fatal(err)
			}
			if err := b.DeleteVolume(ctx, vol); err != nil {
				t.Fatal(err)
			}
			if got := len(s.RecoveryQueue()) == 1; got != tc.wantQueue {
				t.Errorf("in the recovery queue: %v, want %v (%+v)", got, tc.wantQueue, s.RecoveryQueue())
			}
		})
	}
}
