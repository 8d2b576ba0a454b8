package controller

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/ontap-csi/ontap-csi/backends"
)

func TestPoolList(t *testing.T) {
	l, err := parsePoolList("nas1:aggr1,aggr2; san.*:.*")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		backend, pool string
		want          bool
	}{
		{"nas1", "aggr1", true},
		{"nas1", "aggr3", false},
		{"nas10", "aggr1", false}, // names match whole
		{"san-east", "anything", true},
	} {
		if got := l.matches(tc.backend, tc.pool); got != tc.want {
			t.Errorf("%s:%s matched %v", tc.backend, tc.pool, got)
		}
	}
	for _, bad := range []string{"", "nopool", "a:", "a:(", ":b"} {
		if _, err := parsePoolList(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestPoolAllowed(t *testing.T) {
	gold := backends.Pool{Name: "b_pool_0", Labels: map[string]string{"tier": "gold", "zone": "a"}, Media: "ssd", ProvisioningTypes: []string{"thick"},
		Region: "eu", Zone: "eu-1"}
	// silver is an ontap-nas-economy pool: no snapshots, no clones.
	silver := backends.Pool{Name: "b_pool_1", Labels: map[string]string{"tier": "silver"}, Media: "hdd", ProvisioningTypes: []string{"thin"}, NoSnapshots: true, NoClones: true}
	for _, tc := range []struct {
		params map[string]string
		want   []string
	}{
		{nil, []string{"b_pool_0", "b_pool_1"}},
		{map[string]string{"selector": "tier=gold"}, []string{"b_pool_0"}},
		{map[string]string{"selector": "tier in (gold,silver); zone=a"}, []string{"b_pool_0"}},
		{map[string]string{"media": "hdd"}, []string{"b_pool_1"}},
		{map[string]string{"provisioningType": "thick"}, []string{"b_pool_0"}},
		{map[string]string{"storagePools": "b:b_pool_1"}, []string{"b_pool_1"}},
		{map[string]string{"storagePools": "b:b_pool_1", "additionalStoragePools": "b:b_pool_0"}, []string{"b_pool_0", "b_pool_1"}},
		{map[string]string{"excludeStoragePools": "b:.*_0"}, []string{"b_pool_1"}},
		// Trident's region and zone attributes: a pool without one offers none.
		{map[string]string{"region": "eu"}, []string{"b_pool_0"}},
		{map[string]string{"zone": "eu-1", "region": "eu"}, []string{"b_pool_0"}},
		{map[string]string{"zone": "eu-2"}, nil},
		// IOPS: no ONTAP pool offers it, as in Trident; only
		// additionalStoragePools can still name a pool.
		{map[string]string{"IOPS": "1000"}, nil},
		{map[string]string{"IOPS": "1000", "additionalStoragePools": "b:b_pool_1"}, []string{"b_pool_1"}},
		{map[string]string{"snapshots": "true"}, []string{"b_pool_0"}},
		{map[string]string{"clones": "true"}, []string{"b_pool_0"}},
		{map[string]string{"snapshots": "false", "clones": "false"}, []string{"b_pool_0", "b_pool_1"}},
	} {
		p, err := parseParameters(tc.params)
		if err != nil {
			t.Fatalf("%v: %v", tc.params, err)
		}
		var got []string
		for _, pool := range []backends.Pool{gold, silver} {
			if p.poolAllowed("b", pool) {
				got = append(got, pool.Name)
			}
		}
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("%v: pools %v, want %v", tc.params, got, tc.want)
		}
	}
}

func TestIOPSMustBeAnInteger(t *testing.T) {
	if _, err := parseParameters(map[string]string{"IOPS": "fast"}); err == nil || !strings.Contains(err.Error(), `IOPS="fast"`) {
		t.Fatalf("err = %v", err)
	}
}

func FuzzParseParameters(f *testing.F) {
	f.Add("backendType", "ontap-nas", "storagePools", "nas1:aggr1,aggr2;san:.*")
	f.Add("trident.netapp.io/snapshotReserve", "10%", "selector", "tier in (gold,silver); zone=a")
	f.Add("provisioningType", "thick", "unixPermissions", "---rwxr-xr-x")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		p, err := parseParameters(map[string]string{k1: v1, k2: v2})
		if err != nil {
			return
		}
		if r := p.options.SnapshotReserve; r != nil && (*r < 0 || *r > 90) {
			t.Fatalf("snapshot reserve %d accepted", *r)
		}
		if sr := p.options.SpaceReserve; sr != "" && sr != "none" && sr != "volume" {
			t.Fatalf("space reserve %q", sr)
		}
		// Whatever parsed must be usable without panicking.
		p.poolAllowed("b", backends.Pool{Name: "x", Labels: labels.Set{"a": "b"}})
	})
}

func FuzzPageToken(f *testing.F) {
	f.Add("pvc-1")
	f.Add("invalid-token")
	f.Fuzz(func(t *testing.T, s string) {
		if s != "" {
			if id, ok := parsePageToken(pageToken(s)); !ok || id != s {
				t.Fatalf("token of %q decodes to %q, %v", s, id, ok)
			}
		}
		parsePageToken(s) // any input: no panic
	})
}
