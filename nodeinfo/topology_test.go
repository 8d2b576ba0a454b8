package nodeinfo

import (
	"maps"
	"testing"
)

// TopologyLabels keeps what Trident's prefix match keeps: every key that
// starts with topology.kubernetes.io, and nothing else.
func TestTopologyLabels(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   map[string]string
	}{
		{"zone and region", map[string]string{
			"topology.kubernetes.io/zone": "z1", "topology.kubernetes.io/region": "r1",
			"kubernetes.io/hostname": "worker-1", "kubernetes.io/os": "linux",
		}, map[string]string{"topology.kubernetes.io/zone": "z1", "topology.kubernetes.io/region": "r1"}},
		{"legacy and foreign keys are not topology", map[string]string{
			"failure-domain.beta.kubernetes.io/zone": "z1", "example.com/topology.kubernetes.io": "x",
			"topology.example.com/rack": "r7",
		}, map[string]string{}},
		{"a plain prefix, as Trident matches it", map[string]string{
			"topology.kubernetes.io-custom/rack": "r7",
		}, map[string]string{"topology.kubernetes.io-custom/rack": "r7"}},
		{"empty value kept", map[string]string{"topology.kubernetes.io/zone": ""}, map[string]string{"topology.kubernetes.io/zone": ""}},
		{"no labels", nil, map[string]string{}},
	} {
		got := TopologyLabels(tc.labels)
		if got == nil || !maps.Equal(got, tc.want) {
			t.Errorf("%s: TopologyLabels(%v) = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
}
