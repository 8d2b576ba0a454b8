package ontap_test

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

func fencer(t *testing.T, b backends.Backend) backends.Fencer {
	t.Helper()
	f, ok := b.(backends.Fencer)
	if !ok {
		t.Fatalf("%s is not a Fencer", b.Driver())
	}
	return f
}

// sanAccess is who reaches which LUN on the simulator: "<lun> <igroup>
// <initiators>", sorted.
func sanAccess(s *ontapsim.Simulator) []string {
	members := map[string][]string{}
	for _, ig := range s.IGroups() {
		members[ig.Name] = slices.Sorted(slices.Values(ig.Initiators))
	}
	var out []string
	for _, m := range s.LUNMaps() {
		out = append(out, fmt.Sprintf("%s %s %v", m.LUNPath, m.IGroup, members[m.IGroup]))
	}
	slices.Sort(out)
	return out
}

// A fenced node's igroup no longer maps the LUN; another node's map and
// igroup are untouched; the repeat removes nothing and succeeds.
func TestSANFence(t *testing.T) {
	for _, driver := range []string{config.DriverONTAPSAN, config.DriverONTAPSANEconomy} {
		t.Run(driver, func(t *testing.T) {
			b, s := simBackend(t, driver, ontapsim.Config{}, nil)
			ctx := ctxT(t)
			vol := create(t, b, "pvc-f1", gib, backends.AccessBlock)
			other := create(t, b, "pvc-f2", gib, backends.AccessBlock)
			n1 := backends.Node{Name: "worker-1", IQN: "iqn.1994-05.com.redhat:w1"}
			n2 := backends.Node{Name: "worker-2", IQN: "iqn.1994-05.com.redhat:w2"}
			for _, p := range []struct {
				v *backends.Volume
				n backends.Node
			}{{vol, n1}, {vol, n2}, {other, n1}} {
				if _, err := b.Publish(ctx, lookup(t, b, p.v.ID), &backends.PublishRequest{Node: p.n, AccessType: backends.AccessBlock}); err != nil {
					t.Fatal(err)
				}
			}
			if n := len(s.LUNMaps()); n != 3 {
				t.Fatalf("%d maps before the fence: %v", n, sanAccess(s))
			}
			removed, err := fencer(t, b).Fence(ctx, lookup(t, b, vol.ID), n1.Name, &n1)
			if err != nil || len(removed) != 1 || !strings.Contains(removed[0], "worker-1-") {
				t.Fatalf("fence: %v, removed %v", err, removed)
			}
			var n1Maps, n2Maps int
			for _, m := range s.LUNMaps() {
				switch {
				case strings.HasPrefix(m.IGroup, "worker-1-"):
					n1Maps++
					if strings.Contains(m.LUNPath, "pvc_f1") {
						t.Errorf("worker-1 still maps the fenced LUN: %+v", m)
					}
				case strings.HasPrefix(m.IGroup, "worker-2-"):
					n2Maps++
				}
			}
			// worker-1 keeps its other volume (its own detach fences
			// that); worker-2 keeps the fenced volume.
			if n1Maps != 1 || n2Maps != 1 {
				t.Errorf("after the fence: %v", sanAccess(s))
			}
			before := sanAccess(s)
			removed, err = fencer(t, b).Fence(ctx, lookup(t, b, vol.ID), n1.Name, &n1)
			if err != nil || len(removed) != 0 || !reflect.DeepEqual(sanAccess(s), before) {
				t.Errorf("repeat: %v, removed %v, access %v (was %v)", err, removed, sanAccess(s), before)
			}
		})
	}
}

// What cannot be fenced is refused, and the refusal changes nothing on
// ONTAP: a LUN reached through a shared igroup holding the node's IQN
// (Trident 20.10's "trident"), and one whose other maps cannot be checked
// without the node's IQN.
func TestSANFenceRefusals(t *testing.T) {
	b, s := simBackend(t, config.DriverONTAPSAN, ontapsim.Config{}, nil)
	ctx := ctxT(t)
	n1 := backends.Node{Name: "worker-1", IQN: "iqn.1994-05.com.redhat:w1"}
	n2 := backends.Node{Name: "worker-2", IQN: "iqn.1994-05.com.redhat:w2"}

	shared := create(t, b, "pvc-shared", gib, backends.AccessBlock)
	if _, err := s.CreateIGroup("trident", "", "", n1.IQN, n2.IQN); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MapLUN(s.LUNs()[0].Path, "trident"); err != nil {
		t.Fatal(err)
	}
	before := sanAccess(s)
	_, err := fencer(t, b).Fence(ctx, lookup(t, b, shared.ID), n1.Name, &n1)
	if !errors.Is(err, backends.ErrNotFenced) || !strings.Contains(err.Error(), "trident") {
		t.Errorf("shared igroup: %v, want ErrNotFenced naming it", err)
	}
	if got := sanAccess(s); !reflect.DeepEqual(got, before) {
		t.Errorf("the refusal changed ONTAP: %v, was %v", got, before)
	}

	// Not registered: the IQN is unknown, so worker-2's igroup cannot be
	// ruled out; worker-1 has no map of its own, so nothing is removed.
	b2, s2 := simBackend(t, config.DriverONTAPSAN, ontapsim.Config{}, nil)
	v := create(t, b2, "pvc-x", gib, backends.AccessBlock)
	if _, err := b2.Publish(ctx, lookup(t, b2, v.ID), &backends.PublishRequest{Node: n2, AccessType: backends.AccessBlock}); err != nil {
		t.Fatal(err)
	}
	before = sanAccess(s2)
	if _, err := fencer(t, b2).Fence(ctx, lookup(t, b2, v.ID), n1.Name, nil); !errors.Is(err, backends.ErrNotFenced) {
		t.Errorf("unknown IQN: %v, want ErrNotFenced", err)
	}
	if _, err := fencer(t, b2).Fence(ctx, lookup(t, b2, v.ID), "", &n1); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("no node name: %v, want ErrInvalid", err)
	}
	if got := sanAccess(s2); !reflect.DeepEqual(got, before) {
		t.Errorf("the refusals changed ONTAP: %v, was %v", got, before)
	}
	// With the IQN known, worker-2's igroup is read and does not hold it.
	if removed, err := fencer(t, b2).Fence(ctx, lookup(t, b2, v.ID), n1.Name, &n1); err != nil || len(removed) != 0 {
		t.Errorf("node without access: %v, removed %v", err, removed)
	}
}

// nasAccess is every export rule on the simulator: "<policy> <clients>",
// sorted, with the policy each volume uses.
func nasAccess(s *ontapsim.Simulator) []string {
	var out []string
	for _, p := range s.ExportPolicies() {
		for _, r := range p.Rules {
			out = append(out, p.Name+" "+strings.Join(r.Clients, ","))
		}
	}
	for _, v := range s.Volumes() {
		out = append(out, "volume "+v.Name+" on "+v.ExportPolicy)
	}
	slices.Sort(out)
	return out
}

func TestNASFence(t *testing.T) {
	for _, driver := range []string{config.DriverONTAPNAS, config.DriverONTAPNASEconomy} {
		t.Run(driver, func(t *testing.T) {
			b, s := simBackend(t, driver, ontapsim.Config{}, map[string]any{
				"autoExportPolicy": true, "autoExportCIDRs": []string{"10.0.0.0/8"}, "emptyFlexvolDeferredDeletePeriod": "0",
			})
			ctx := ctxT(t)
			vol := create(t, b, "pvc-n1", gib, backends.AccessMount)
			n1 := backends.Node{Name: "n1", IPs: []string{"10.1.1.1", "192.168.0.1"}}
			n2 := backends.Node{Name: "n2", IPs: []string{"10.2.2.2"}}
			for _, n := range []backends.Node{n1, n2} {
				if _, err := b.Publish(ctx, lookup(t, b, vol.ID), &backends.PublishRequest{Node: n, AccessType: backends.AccessMount}); err != nil {
					t.Fatal(err)
				}
			}
			own := "trident_pvc_n1"
			if got := ruleSummary(s, own); !slices.Equal(got, []string{"10.1.1.1:any", "10.2.2.2:any"}) {
				t.Fatalf("rules before the fence %v", got)
			}
			removed, err := fencer(t, b).Fence(ctx, lookup(t, b, vol.ID), n1.Name, &n1)
			if err != nil || len(removed) != 1 || !strings.Contains(removed[0], "10.1.1.1") {
				t.Fatalf("fence: %v, removed %v", err, removed)
			}
			if got := ruleSummary(s, own); !slices.Equal(got, []string{"10.2.2.2:any"}) {
				t.Errorf("rules after the fence %v: n2's must stay, n1's must go", got)
			}
			before := nasAccess(s)
			removed, err = fencer(t, b).Fence(ctx, lookup(t, b, vol.ID), n1.Name, &n1)
			if err != nil || len(removed) != 0 || !reflect.DeepEqual(nasAccess(s), before) {
				t.Errorf("repeat: %v, removed %v", err, removed)
			}
			// The last node fenced: the volume is back on the empty policy.
			if _, err := fencer(t, b).Fence(ctx, lookup(t, b, vol.ID), n2.Name, &n2); err != nil {
				t.Fatal(err)
			}
			if policy(s, own) != nil {
				t.Errorf("own policy left after the last fence: %v", nasAccess(s))
			}
		})
	}
}

// Refusals change nothing: a node whose addresses are unknown, and an
// admin's policy that admits the node (here by prefix), which ontap-csi
// does not edit.
func TestNASFenceRefusals(t *testing.T) {
	b, s := simBackend(t, config.DriverONTAPNAS, ontapsim.Config{}, map[string]any{
		"autoExportPolicy": true, "autoExportCIDRs": []string{"10.0.0.0/8"},
	})
	ctx := ctxT(t)
	vol := create(t, b, "pvc-r", gib, backends.AccessMount)
	n1 := backends.Node{Name: "n1", IPs: []string{"10.1.1.1"}}
	if _, err := b.Publish(ctx, lookup(t, b, vol.ID), &backends.PublishRequest{Node: n1, AccessType: backends.AccessMount}); err != nil {
		t.Fatal(err)
	}
	before := nasAccess(s)
	if _, err := fencer(t, b).Fence(ctx, lookup(t, b, vol.ID), n1.Name, nil); !errors.Is(err, backends.ErrNotFenced) {
		t.Errorf("unknown addresses: %v, want ErrNotFenced", err)
	}
	if _, err := fencer(t, b).Fence(ctx, lookup(t, b, vol.ID), n1.Name, &backends.Node{Name: "n1"}); !errors.Is(err, backends.ErrNotFenced) {
		t.Errorf("no addresses: %v, want ErrNotFenced", err)
	}
	if _, err := fencer(t, b).Fence(ctx, lookup(t, b, vol.ID), "", &n1); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("no node name: %v, want ErrInvalid", err)
	}
	if got := nasAccess(s); !reflect.DeepEqual(got, before) {
		t.Errorf("the refusals changed ONTAP: %v, was %v", got, before)
	}

	s2, err := ontapsim.New(ontapsim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s2.Close() })
	if _, err := s2.Start("127.0.0.1:0", true); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.CreateExportPolicy("admin", ontapsim.ExportRule{Clients: []string{"10.0.0.0/8"}}, ontapsim.ExportRule{Clients: []string{"10.9.9.9"}}); err != nil {
		t.Fatal(err)
	}
	b2, _ := simBackendOn(t, s2, config.DriverONTAPNAS, map[string]any{"defaults": map[string]any{"exportPolicy": "admin"}})
	v2 := create(t, b2, "pvc-a", gib, backends.AccessMount)
	before = nasAccess(s2)
	_, err = fencer(t, b2).Fence(ctx, lookup(t, b2, v2.ID), n1.Name, &n1)
	if !errors.Is(err, backends.ErrNotFenced) || !strings.Contains(err.Error(), "10.0.0.0/8") || strings.Contains(err.Error(), "10.9.9.9") {
		t.Errorf("admin's policy: %v, want ErrNotFenced naming the prefix rule only", err)
	}
	if got := nasAccess(s2); !reflect.DeepEqual(got, before) {
		t.Errorf("the refusal changed ONTAP: %v, was %v", got, before)
	}
	// A node the admin's policy does not admit is fenced already.
	if removed, err := fencer(t, b2).Fence(ctx, lookup(t, b2, v2.ID), "n3", &backends.Node{Name: "n3", IPs: []string{"192.168.7.7"}}); err != nil || len(removed) != 0 {
		t.Errorf("node outside the admin's rules: %v, removed %v", err, removed)
	}
}
