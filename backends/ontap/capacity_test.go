package ontap_test

import (
	"errors"
	"testing"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

// The kube-scheduler judges a claim by a CSIStorageCapacity's
// maximumVolumeSize when it is set, so Capacity's MaxVolumeSize must be
// what one create gets in the pool: the free space for a thick volume
// (less its snapshot reserve and LUN headroom) even when limitVolumeSize is
// above it, limitVolumeSize (or an economy pool's limitVolumePoolSize) for
// a thin one, and no bound for a thin one without either. Where the test
// says so, a create of MaxVolumeSize+1 bytes fails on the simulator and
// one of MaxVolumeSize succeeds: the answer is exact, not merely safe.
func TestCapacityMaxVolumeSize(t *testing.T) {
	const aggrSize = 10 * gib
	thick := backends.VolumeOptions{SpaceReserve: "volume"}
	thin := backends.VolumeOptions{SpaceReserve: "none"}
	for _, tc := range []struct {
		name   string
		driver string
		extra  map[string]any
		opts   backends.VolumeOptions
		// want: the exact MaxVolumeSize; -1: check it against the
		// simulator by creates instead (bounded, below the free space).
		want        int64
		wantBounded bool
		probe       bool // create max+1 (must fail) and max (must succeed)
	}{
		{name: "nas thick, limit above the free space", driver: config.DriverONTAPNAS,
			extra: map[string]any{"limitVolumeSize": "50Gi"}, opts: thick, want: -1, wantBounded: true, probe: true},
		{name: "nas thick by the pool default, limit above the free space", driver: config.DriverONTAPNAS,
			extra: map[string]any{"limitVolumeSize": "50Gi", "defaults": map[string]any{"spaceReserve": "volume"}}, want: -1, wantBounded: true, probe: true},
		{name: "nas thick without limit", driver: config.DriverONTAPNAS, opts: thick, want: -1, wantBounded: true, probe: true},
		{name: "nas thick, 20% snapshot reserve", driver: config.DriverONTAPNAS,
			extra: map[string]any{"limitVolumeSize": "50Gi"}, opts: backends.VolumeOptions{SpaceReserve: "volume", SnapshotReserve: new(20)}, want: -1, wantBounded: true, probe: true},
		{name: "san thick, 20% snapshot reserve", driver: config.DriverONTAPSAN,
			extra: map[string]any{"limitVolumeSize": "50Gi"}, opts: backends.VolumeOptions{SpaceReserve: "volume", SnapshotReserve: new(20)}, want: -1, wantBounded: true, probe: true},
		{name: "nas thick, limit below the free space", driver: config.DriverONTAPNAS,
			extra: map[string]any{"limitVolumeSize": "1Gi"}, opts: thick, want: gib, wantBounded: true},
		{name: "nas thick within limitAggregateUsage", driver: config.DriverONTAPNAS,
			extra: map[string]any{"limitVolumeSize": "50Gi", "limitAggregateUsage": "50%"}, opts: thick, want: -1, wantBounded: true, probe: true},
		{name: "san thick, limit above the free space", driver: config.DriverONTAPSAN,
			extra: map[string]any{"limitVolumeSize": "50Gi"}, opts: thick, want: -1, wantBounded: true, probe: true},
		{name: "nas thin, limit above the free space", driver: config.DriverONTAPNAS,
			extra: map[string]any{"limitVolumeSize": "50Gi"}, opts: thin, want: 50 * gib, wantBounded: true},
		{name: "san thin, limit", driver: config.DriverONTAPSAN,
			extra: map[string]any{"limitVolumeSize": "50Gi"}, opts: thin, want: 50 * gib, wantBounded: true},
		{name: "nas thin without limit", driver: config.DriverONTAPNAS, opts: thin, want: 0, wantBounded: false},
		{name: "nas-economy thick, limit above the free space", driver: config.DriverONTAPNASEconomy,
			extra: map[string]any{"limitVolumeSize": "50Gi"}, opts: thick, want: -1, wantBounded: true},
		{name: "san-economy thick, limit above the free space", driver: config.DriverONTAPSANEconomy,
			extra: map[string]any{"limitVolumeSize": "50Gi"}, opts: thick, want: -1, wantBounded: true},
		// A member may not take its pool FlexVol above 2 GiB: with a
		// 10 % snapshot reserve, 2 GiB * 0.9 rounded down.
		{name: "nas-economy thin, limitVolumePoolSize", driver: config.DriverONTAPNASEconomy,
			extra: map[string]any{"limitVolumePoolSize": "2Gi"}, opts: backends.VolumeOptions{SpaceReserve: "none", SnapshotReserve: new(10)},
			want: 2 * gib * 90 / 100, wantBounded: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			extra := map[string]any{"aggregate": "aggr1"}
			for k, v := range tc.extra {
				extra[k] = v
			}
			b, s := simBackend(t, tc.driver, ontapsim.Config{AggregateSize: aggrSize}, extra)
			c, err := b.Capacity(ctxT(t), "aggr1", tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if c.Available <= 0 || c.Available > aggrSize {
				t.Fatalf("available %d, want in (0, %d]", c.Available, aggrSize)
			}
			if c.Bounded != tc.wantBounded {
				t.Fatalf("bounded %v (max %d), want %v", c.Bounded, c.MaxVolumeSize, tc.wantBounded)
			}
			switch {
			case tc.want >= 0 && c.MaxVolumeSize != tc.want:
				t.Errorf("max volume size %d, want %d", c.MaxVolumeSize, tc.want)
			case tc.want < 0 && (c.MaxVolumeSize <= 0 || c.MaxVolumeSize > c.Available):
				t.Errorf("max volume size %d of a thick pool, want in (0, available %d]", c.MaxVolumeSize, c.Available)
			}
			if !tc.probe {
				return
			}
			mk := func(name string, size int64) error {
				req := &backends.CreateRequest{Name: name, Pool: "aggr1", SizeBytes: size, AccessType: backends.AccessMount, Options: tc.opts}
				if tc.driver == config.DriverONTAPSAN {
					req.AccessType, req.FSType = backends.AccessBlock, backends.FSTypeRaw
				}
				_, err := b.CreateVolume(ctxT(t), req)
				return err
			}
			before := len(s.Volumes())
			if err := mk("pvc-over", c.MaxVolumeSize+1); !errors.Is(err, backends.ErrExhausted) {
				t.Errorf("create of max+1 bytes: %v, want ErrExhausted", err)
			}
			if n := len(s.Volumes()); n != before {
				t.Errorf("the refused create left %d volumes", n-before)
			}
			if err := mk("pvc-max", c.MaxVolumeSize); err != nil {
				t.Errorf("create of max %d bytes: %v", c.MaxVolumeSize, err)
			}
		})
	}
}

// The economy drivers' thick bound is the free space too: a member of the
// reported maximum fits in a new pool FlexVol.
func TestCapacityMaxVolumeSizeEconomyCreates(t *testing.T) {
	for _, driver := range []string{config.DriverONTAPNASEconomy, config.DriverONTAPSANEconomy} {
		t.Run(driver, func(t *testing.T) {
			b, _ := simBackend(t, driver, ontapsim.Config{AggregateSize: 10 * gib}, map[string]any{
				"aggregate": "aggr1", "limitVolumeSize": "50Gi", "defaults": map[string]any{"spaceReserve": "volume"},
			})
			c, err := b.Capacity(ctxT(t), "aggr1", backends.VolumeOptions{})
			if err != nil || !c.Bounded || c.MaxVolumeSize > c.Available {
				t.Fatalf("capacity %+v, %v: want bounded by the free space", c, err)
			}
			req := &backends.CreateRequest{Name: "pvc-max", Pool: "aggr1", SizeBytes: c.MaxVolumeSize, AccessType: backends.AccessMount}
			if driver == config.DriverONTAPSANEconomy {
				req.AccessType, req.FSType = backends.AccessBlock, backends.FSTypeRaw
			}
			// Over the maximum first: a failure after the maximum's create
			// would prove nothing.
			req.Name, req.SizeBytes = "pvc-over", c.MaxVolumeSize+64<<20
			if _, err := b.CreateVolume(ctxT(t), req); err == nil {
				t.Errorf("create of %d bytes, above the reported maximum, succeeded", req.SizeBytes)
			}
			req.Name, req.SizeBytes = "pvc-max", c.MaxVolumeSize
			if _, err := b.CreateVolume(ctxT(t), req); err != nil {
				t.Errorf("create of the reported maximum %d: %v", c.MaxVolumeSize, err)
			}
		})
	}
}
