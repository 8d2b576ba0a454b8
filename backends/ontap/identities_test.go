package ontap_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap"
	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

var cacheNode = backends.Node{Name: "worker-1", IQN: "iqn.1994-05.com.redhat:w1", IPs: []string{"10.1.1.1"}}

var nasAutoPolicy = map[string]any{"autoExportPolicy": true, "autoExportCIDRs": []string{"10.0.0.0/8"}}

// remembered finds a volume as the controller's publish, unpublish and
// delete do: from the identity cache, else by a lookup it remembers.
func remembered(t *testing.T, b backends.Backend, id string) *backends.Volume {
	t.Helper()
	c := b.(backends.IdentityCache)
	if v, ok := c.KnownVolume(id, ""); ok {
		return v
	}
	v := lookup(t, b, id)
	c.Remember(v)
	return v
}

func known(b backends.Backend, id string) bool {
	_, ok := b.(backends.IdentityCache).KnownVolume(id, "")
	return ok
}

// hand sends a request to the simulator's REST API, as an administrator
// changing ONTAP by hand.
func hand(t *testing.T, s *ontapsim.Simulator, method, path string, body any) {
	t.Helper()
	status, out, err := s.Do(method, path, body)
	if err != nil || status >= 300 {
		t.Fatalf("%s %s: %d %v %v", method, path, status, out, err)
	}
}

func volumeNamed(s *ontapsim.Simulator, name string) bool {
	_, ok := s.Volume(name)
	return ok
}

// A remembered volume changed on ONTAP by hand: the next call does what an
// uncached one would, and the volume is no longer remembered after a call
// that failed. A restarted controller, and a remembered volume older than
// the TTL, look the volume up.
func TestRememberedVolumeChangedByHand(t *testing.T) {
	const name = "trident_pvc_h"
	deleteByHand := func(t *testing.T, s *ontapsim.Simulator) {
		hand(t, s, http.MethodDelete, "/api/storage/volumes/"+simVolume(t, s, name).UUID+"?force=true", nil)
	}
	renameByHand := func(t *testing.T, s *ontapsim.Simulator) {
		hand(t, s, http.MethodPatch, "/api/storage/volumes/"+simVolume(t, s, name).UUID, map[string]any{"name": "renamed_by_hand"})
	}
	type result struct {
		err        error // nil, or the kind wanted
		remembered bool  // afterwards
	}
	for _, tc := range []struct {
		name      string
		published bool // before the change
		change    func(t *testing.T, s *ontapsim.Simulator)
		call      string
		want      map[string]result
		// unpublish: the node's map or rule is gone from ONTAP afterwards.
		// Not when the volume is: an uncached unpublish finds no volume and
		// leaves what is left.
		revoked bool
	}{
		{"deleted, then published", false, deleteByHand, "publish", map[string]result{
			config.DriverONTAPNAS: {backends.ErrNotFound, false}, config.DriverONTAPSAN: {backends.ErrNotFound, false}}, false},
		{"deleted, then unpublished", true, deleteByHand, "unpublish", map[string]result{
			config.DriverONTAPNAS: {nil, false}, config.DriverONTAPSAN: {nil, false}}, false},
		{"deleted, then deleted", true, deleteByHand, "delete", map[string]result{
			config.DriverONTAPNAS: {nil, false}, config.DriverONTAPSAN: {nil, false}}, false},
		// ontap-san publishes by the LUN's path, which the rename changed:
		// not found, as the lookup by name says. ontap-nas addresses the
		// FlexVol by UUID: the same volume is served until identityTTL.
		{"renamed, then published", false, renameByHand, "publish", map[string]result{
			config.DriverONTAPNAS: {nil, true}, config.DriverONTAPSAN: {backends.ErrNotFound, false}}, false},
		// By UUID (ontap-san's map, ontap-nas's policy): the node's access
		// is revoked all the same.
		{"renamed, then unpublished", true, renameByHand, "unpublish", map[string]result{
			config.DriverONTAPNAS: {nil, true}, config.DriverONTAPSAN: {nil, true}}, true},
		{"nothing changed, restarted controller", false, nil, "restart", map[string]result{
			config.DriverONTAPNAS: {nil, false}, config.DriverONTAPSAN: {nil, false}}, false},
		{"nothing changed, older than the TTL", false, nil, "ttl", map[string]result{
			config.DriverONTAPNAS: {nil, false}, config.DriverONTAPSAN: {nil, false}}, false},
	} {
		for _, driver := range []string{config.DriverONTAPNAS, config.DriverONTAPSAN} {
			t.Run(tc.name+"/"+driver, func(t *testing.T) {
				var extra map[string]any
				if driver == config.DriverONTAPNAS {
					extra = nasAutoPolicy
				}
				b, s := simBackend(t, driver, ontapsim.Config{}, extra)
				ctx := ctxT(t)
				clock := time.Now()
				ontap.SetNow(t, func() time.Time { return clock })
				create(t, b, "pvc-h", gib, backends.AccessMount)
				vol := remembered(t, b, "pvc-h")
				if tc.published {
					_, err := b.Publish(ctx, vol, &backends.PublishRequest{Node: cacheNode, AccessType: backends.AccessMount})
					must(t, err)
					vol = remembered(t, b, "pvc-h")
				}
				if !known(b, "pvc-h") {
					t.Fatal("the volume is not remembered")
				}
				if tc.change != nil {
					tc.change(t, s)
				}
				var err error
				switch tc.call {
				case "publish":
					_, err = b.Publish(ctx, vol, &backends.PublishRequest{Node: cacheNode, AccessType: backends.AccessMount})
					if err != nil && (policy(s, name) != nil || len(s.LUNMaps()) != 0) {
						t.Errorf("a failed publish left policies %v, maps %v", s.ExportPolicies(), s.LUNMaps())
					}
				case "unpublish":
					err = b.Unpublish(ctx, vol, cacheNode.Name, &cacheNode)
					if !tc.revoked {
						break
					}
					if len(s.LUNMaps()) != 0 || len(s.IGroups()) != 0 {
						t.Errorf("left: maps %v, igroups %v", s.LUNMaps(), s.IGroups())
					}
					if p := policy(s, name); p != nil {
						t.Errorf("the volume's policy is left: %+v", p)
					}
				case "delete":
					err = b.DeleteVolume(ctx, vol)
				case "restart":
					b = simBackendOpts(t, s, driver, extra, ontap.Options{})
				case "ttl":
					clock = clock.Add(ontap.IdentityTTL)
				}
				want := tc.want[driver]
				if (want.err == nil) != (err == nil) || want.err != nil && !errors.Is(err, want.err) {
					t.Errorf("%s: %v, want %v", tc.call, err, want.err)
				}
				if got := known(b, "pvc-h"); got != want.remembered {
					t.Errorf("remembered afterwards: %v, want %v", got, want.remembered)
				}
				if tc.change == nil {
					// The next call looks the volume up, and finds it.
					got := requestsOf(t, s, func() error { remembered(t, b, "pvc-h"); return nil })
					if got["GET /api/storage/volumes"] != 1 {
						t.Errorf("requests of the next lookup %v, want the volume read", got)
					}
				}
			})
		}
	}
}

// An igroup the publish remembered and that was deleted by hand is made
// again by the next publish, which maps the LUN to it.
func TestRememberedIgroupDeletedByHand(t *testing.T) {
	b, s := simBackend(t, config.DriverONTAPSAN, ontapsim.Config{}, nil)
	ctx := ctxT(t)
	for _, n := range []string{"pvc-1", "pvc-2"} {
		create(t, b, n, gib, backends.AccessMount)
	}
	publish := func(id string) error {
		_, err := b.Publish(ctx, remembered(t, b, id), &backends.PublishRequest{Node: cacheNode, AccessType: backends.AccessMount})
		return err
	}
	must(t, publish("pvc-1"))
	igs := s.IGroups()
	if len(igs) != 1 {
		t.Fatalf("igroups %v", igs)
	}
	hand(t, s, http.MethodDelete, "/api/protocols/san/igroups/"+igs[0].UUID+"?allow_delete_while_mapped=true", nil)
	if err := publish("pvc-2"); err != nil {
		t.Fatalf("publish after the igroup was deleted by hand: %v", err)
	}
	igs, lms := s.IGroups(), s.LUNMaps()
	if len(igs) != 1 || len(igs[0].Initiators) != 1 || igs[0].Initiators[0] != cacheNode.IQN ||
		len(lms) != 1 || lms[0].LUNPath != "/vol/trident_pvc_2/lun0" || lms[0].IGroup != igs[0].Name {
		t.Errorf("igroups %+v, maps %+v", igs, lms)
	}
}

// Publishes and unpublishes of one node's LUNs run at once, each
// unpublish trying to delete the node's igroup: every publish ends mapped
// through an igroup that holds the node's IQN, whichever way they
// interleave.
func TestRememberedIgroupConcurrentPublishUnpublish(t *testing.T) {
	b, s := simBackend(t, config.DriverONTAPSAN, ontapsim.Config{}, nil)
	ctx := ctxT(t)
	const rounds, per = 4, 3
	var ids []string
	for i := 0; i < 2*per; i++ {
		id := "pvc-" + string(rune('a'+i))
		create(t, b, id, gib, backends.AccessMount)
		ids = append(ids, id)
	}
	publish := func(id string) error {
		_, err := b.Publish(ctx, remembered(t, b, id), &backends.PublishRequest{Node: cacheNode, AccessType: backends.AccessMount})
		return err
	}
	unpublish := func(id string) error { return b.Unpublish(ctx, remembered(t, b, id), cacheNode.Name, &cacheNode) }
	on, off := ids[:per], ids[per:]
	for _, id := range on {
		must(t, publish(id))
	}
	for r := 0; r < rounds; r++ {
		errs := make(chan error, 2*per)
		for i := 0; i < per; i++ {
			go func(up, down string) { errs <- unpublish(down) }(off[i], on[i])
			go func(up, down string) { errs <- publish(up) }(off[i], on[i])
		}
		for i := 0; i < 2*per; i++ {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", r, err)
			}
		}
		on, off = off, on
		igs, lms := s.IGroups(), s.LUNMaps()
		if len(igs) != 1 || len(igs[0].Initiators) != 1 || len(lms) != per {
			t.Fatalf("round %d: igroups %+v, maps %+v", r, igs, lms)
		}
		for _, m := range lms {
			if m.IGroup != igs[0].Name {
				t.Errorf("round %d: map %+v not to igroup %s", r, m, igs[0].Name)
			}
		}
	}
	for _, id := range on {
		must(t, unpublish(id))
	}
	if len(s.IGroups()) != 0 || len(s.LUNMaps()) != 0 {
		t.Errorf("left: igroups %v, maps %v", s.IGroups(), s.LUNMaps())
	}
}

// Publishes of one node's LUNs reach ONTAP side by side: they share the
// node's igroup, and a lock of it put a pod's maps in a row (issue 18: 40
// publishes to one node took 7.5 times ONTAP's latency). The first ones
// make the igroup once between them, not once each. The maps' POSTs take
// 150 ms each here, so calls started together overlap unless something
// serializes them.
func TestPublishesOfOneNodeRunSideBySide(t *testing.T) {
	slow := ontapsim.Range{Min: 150 * time.Millisecond, Max: 150 * time.Millisecond}
	b, s := simBackend(t, config.DriverONTAPSAN, ontapsim.Config{Latency: ontapsim.LatencyModel{SyncMutation: slow}}, nil)
	ctx := ctxT(t)
	const n = 6
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "pvc-" + string(rune('a'+i))
		create(t, b, ids[i], gib, backends.AccessMount)
	}
	errs := make(chan error, n)
	for _, id := range ids {
		go func() {
			_, err := b.Publish(ctx, remembered(t, b, id), &backends.PublishRequest{Node: cacheNode, AccessType: backends.AccessMount})
			errs <- err
		}()
	}
	for range n {
		must(t, <-errs)
	}
	st := s.Stats()
	maps := st.Endpoints["POST /api/protocols/san/lun-maps"]
	if maps.Requests != n || maps.MaxInFlight < 2 {
		t.Errorf("LUN map POSTs: %d, at most %d at once; want %d, several at once", maps.Requests, maps.MaxInFlight, n)
	}
	if made, read := st.Count("POST", "/api/protocols/san/igroups"), st.Count("GET", "/api/protocols/san/igroups"); made != 1 || read != 1 {
		t.Errorf("the igroup read %d times and made %d times, want once each", read, made)
	}
	lms := s.LUNMaps()
	if len(lms) != n {
		t.Errorf("maps %+v, want %d", lms, n)
	}
	seen := map[int]bool{}
	for _, m := range lms {
		if seen[m.LUNID] {
			t.Errorf("LUN ID %d given twice: %+v", m.LUNID, lms)
		}
		seen[m.LUNID] = true
	}
}
