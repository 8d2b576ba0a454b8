package ontapsim

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A volume GET filters on the lookup fields before it renders a record
// (listByKeys); the answer must be the one a filter over whole records
// gives, whichever fields the query names.
func TestVolumeListFiltersOnKeysAndOnTheRest(t *testing.T) {
	a := newTestSim(t, Config{})
	uuids := map[string]string{}
	for _, n := range []string{"vol_a", "vol_b", "vol_c"} {
		uuids[n] = a.createVolume(map[string]any{"name": n, "size": 1 << 30})
	}
	a.must(200, "PATCH", "/api/storage/volumes/"+uuids["vol_b"]+"?return_timeout=10", map[string]any{"state": "offline"})
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"name=vol_a", []string{"vol_a"}},
		{`name="vol_a"&svm.name=svm0&style=flexvol`, []string{"vol_a"}},
		{"name=vol_*&state=offline", []string{"vol_b"}},                     // a key and a rendered field
		{"name=vol_a|vol_b&state=online", []string{"vol_a"}},                // both must hold
		{"name=!vol_a&svm.uuid=" + a.svmUUID(), []string{"vol_b", "vol_c"}}, // negation on a key
		{"uuid=" + uuids["vol_c"], []string{"vol_c"}},
		{"style=flexgroup", nil},
		{"svm.name=other", nil},
		{"state=offline", []string{"vol_b"}},                                                      // no key filter: every record rendered
		{"name=vol_*&space.available=>0&order_by=name&max_records=2", []string{"vol_a", "vol_b"}}, // paged after the filters
	} {
		t.Run(tc.query, func(t *testing.T) {
			r := a.must(200, "GET", "/api/storage/volumes?"+tc.query, nil)
			var got []string
			for _, rec := range r.records() {
				uuid, _ := rec["uuid"].(string)
				for n, u := range uuids {
					if u == uuid {
						got = append(got, n)
					}
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v (%s)", got, tc.want, r.raw)
			}
		})
	}
}

// With NoDataUsage, data written into a volume's directory is not charged
// to it or its aggregate; its LUNs still are.
func TestNoDataUsageLeavesFilesOut(t *testing.T) {
	for _, noData := range []bool{false, true} {
		t.Run(fmt.Sprint("NoDataUsage=", noData), func(t *testing.T) {
			a := newTestSim(t, Config{NoDataUsage: noData})
			uuid := a.createVolume(map[string]any{"name": "thin", "size": 1 << 30, "guarantee": map[string]any{"type": "none"}})
			v, _ := a.sim.Volume("thin")
			if err := os.WriteFile(filepath.Join(v.Directory, "data"), make([]byte, 8*mib), 0o644); err != nil {
				t.Fatal(err)
			}
			used := int64(a.must(200, "GET", "/api/storage/volumes/"+uuid+"?fields=space.used", nil).body["space"].(map[string]any)["used"].(float64))
			if charged := used >= 8*mib; charged == noData {
				t.Errorf("space.used %d after writing 8 MiB", used)
			}
		})
	}
}

// BenchmarkVolumeLookup is one volume GET by name, as the controller's
// lookups send it, among n thin volumes. Its time is the simulator's CPU
// under the model's lock, so it must not grow with n much (ONTAP looks a
// volume up by name in an index).
func BenchmarkVolumeLookup(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s, err := New(Config{NoDataUsage: true})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			for i := range n {
				if _, err := s.CreateVolume(VolumeSpec{Name: fmt.Sprintf("trident_pvc_%04d", i), Size: 1 << 30, Thin: true}); err != nil {
					b.Fatal(err)
				}
			}
			q := url.Values{"name": {`"trident_pvc_0005"`}, "style": {"flexvol"}, "svm.uuid": {s.Info().SVMUUID},
				"fields": {"uuid,name,state,size,nas.path,nas.export_policy.name,space.used,space.available"}}
			for b.Loop() {
				code, body, err := s.Do("GET", "/api/storage/volumes?"+q.Encode(), nil)
				if err != nil || code != 200 || len(body["records"].([]any)) != 1 {
					b.Fatal(code, body, err)
				}
			}
		})
	}
}
