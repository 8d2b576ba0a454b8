package ontap

import (
	"strings"
	"testing"

	"github.com/ontap-csi/ontap-csi/backends/ontap/rest"
)

// The expected names below are written out from Trident 26.06's code
// (ontap_nas_qtree.go Initialize and GetInternalVolumeName,
// ontap_san_economy.go Initialize and LUNHelper, ontap_common.go
// getInternalVolumeNameCommon) and its docs, not computed by ours.

func TestEconomyPoolPrefixesAreTridents(t *testing.T) {
	for _, tc := range []struct{ storagePrefix, nas, san string }{
		{"trident_", "trident_qtree_pool_trident_", "trident_lun_pool_trident_"},
		{"", "trident_qtree_pool_", "trident_lun_pool_"},
		{"k8s-prod_", "trident_qtree_pool_k8s_prod_", "trident_lun_pool_k8s-prod_"},
		{"abc", "trident_qtree_pool_abc_", "trident_lun_pool_abc_"},
		// Replace("__", "_", -1) runs once: "___" keeps a "__".
		{"x__", "trident_qtree_pool_x__", "trident_lun_pool_x__"},
	} {
		if got := qtreePoolPrefix(tc.storagePrefix); got != tc.nas {
			t.Errorf("nas-economy pools of %q: %q, want %q", tc.storagePrefix, got, tc.nas)
		}
		if got := lunPoolPrefix(tc.storagePrefix); got != tc.san {
			t.Errorf("san-economy pools of %q: %q, want %q", tc.storagePrefix, got, tc.san)
		}
	}
}

func TestEconomyInternalNamesAreTridents(t *testing.T) {
	for _, tc := range []struct{ prefix, pv, want string }{
		{"trident_", "pvc-954876af-3a32-4ca4-b507-d5b5424e337e", "trident_pvc_954876af_3a32_4ca4_b507_d5b5424e337e"},
		{"", "pvc-954876af-3a32-4ca4-b507-d5b5424e337e", "pvc_954876af_3a32_4ca4_b507_d5b5424e337e"},
		{"k8s-", "pvc-1", "k8s_pvc_1"},
		{"dev.", "pvc-1", "dev_pvc_1"},
		{"a__", "pvc-1", "a_pvc_1"},
	} {
		for _, max := range []int{maxQtreeName, maxLUNName} {
			got := econInternalName(tc.prefix, tc.pv, max)
			if got != tc.want {
				t.Errorf("%q + %q: %q, want %q", tc.prefix, tc.pv, got, tc.want)
			}
			if id, ok := econVolumeID(tc.prefix, got); !ok || id != tc.pv {
				t.Errorf("%q back: %q %v, want %q", got, id, ok, tc.pv)
			}
		}
	}
}

func TestEconomyHashedNames(t *testing.T) {
	long := "sanity-controller-create-maxlen-" + strings.Repeat("x", 96)
	for _, name := range []string{"my_vol", "a.b", "a--b", "-x", long} {
		q := econInternalName("trident_", name, maxQtreeName)
		if len(q) > maxQtreeName || !volumeNameRE.MatchString(q) || !strings.Contains(q, "__") {
			t.Errorf("%q: qtree name %q", name, q)
		}
		if q != econInternalName("trident_", name, maxQtreeName) {
			t.Errorf("%q: not deterministic", name)
		}
		if _, ok := econVolumeID("trident_", q); ok {
			t.Errorf("%q: hashed name %q reads back", name, q)
		}
	}
	if a, b := econInternalName("trident_", "my_vol", 64), econInternalName("trident_", "my.vol", 64); a == b {
		t.Errorf("two names share %q", a)
	}
	if _, ok := econVolumeID("trident_", "deleted_trident_pvc_1_ABCDE"); ok {
		t.Error("a qtree Trident is deleting reads as a volume")
	}
}

func TestPoolNames(t *testing.T) {
	p := qtreePoolPrefix("trident_")
	a, b := poolName(p, "seed", 0), poolName(p, "seed", 1)
	if a == b || !isPoolName(p, a) || !isPoolName(p, b) || a != poolName(p, "seed", 0) {
		t.Errorf("%q %q", a, b)
	}
	// A Trident pool name (random upper-case letters) is one of ours too.
	if !isPoolName(p, "trident_qtree_pool_trident_MACNWIILZO") || isPoolName(p, "trident_qtree_pool_trident_abc") {
		t.Error("isPoolName")
	}
}

// TestLUNSnapshotNamesAreTridents: Trident's docs give
// "/vol/trident_lun_pool_MACNWIILZO/pvc_954876af_..." for a LUN, and
// GetSnapshotName appends "_snapshot_" and the snapshot name with '-' made
// '_'.
func TestLUNSnapshotNamesAreTridents(t *testing.T) {
	lun := "trident_pvc_954876af_3a32_4ca4_b507_d5b5424e337e"
	got := lunSnapshotName(lun, "snapshot-11111111-2222-3333-4444-555555555555")
	want := "trident_pvc_954876af_3a32_4ca4_b507_d5b5424e337e_snapshot_snapshot_11111111_2222_3333_4444_555555555555"
	if got != want {
		t.Fatalf("%q, want %q", got, want)
	}
	l, s, ok := splitSnapshotLUN(got)
	if !ok || l != lun || s != "snapshot-11111111-2222-3333-4444-555555555555" {
		t.Errorf("split %q %q %v", l, s, ok)
	}
	if _, _, ok := splitSnapshotLUN(lun); ok {
		t.Error("a volume's LUN reads as a snapshot")
	}
	odd := lunSnapshotName(lun, "snap+1")
	if !lunNameRE.MatchString(odd) || len(odd) > maxLUNName {
		t.Errorf("hashed snapshot LUN %q", odd)
	}
	if l, _, ok := splitSnapshotLUN(odd); !ok || l != lun {
		t.Errorf("hashed snapshot LUN %q splits to %q", odd, l)
	}
}

// Of the copies of one volume an abandoned create and its retry made in
// different pools, every caller keeps the same one: the first pool's.
func TestKeepFirstPool(t *testing.T) {
	copies := []rest.Qtree{{Volume: "pool_C", ID: 3}, {Volume: "pool_A", ID: 1}, {Volume: "pool_B", ID: 2}}
	keep, drop := keepFirstPool(copies, func(q *rest.Qtree) string { return q.Volume })
	if keep.Volume != "pool_A" || len(drop) != 2 || drop[0].Volume == "pool_A" || drop[1].Volume == "pool_A" {
		t.Errorf("keep %+v, drop %+v", keep, drop)
	}
	if keep, drop := keepFirstPool([]rest.Qtree{{Volume: "only"}}, func(q *rest.Qtree) string { return q.Volume }); keep.Volume != "only" || len(drop) != 0 {
		t.Errorf("one copy: keep %+v, drop %+v", keep, drop)
	}
	if keep, _ := keepFirstPool([]rest.Qtree{}, func(q *rest.Qtree) string { return q.Volume }); keep != nil {
		t.Errorf("no copy: keep %+v", keep)
	}
}
