package ontap

import (
	"regexp"
	"strings"
	"testing"
)

func TestVolumeName(t *testing.T) {
	long := strings.Repeat("x", 250)
	for _, tc := range []struct {
		prefix, name, want string
	}{
		// Trident's mapping, so that Trident's volumes are found.
		{"trident_", "pvc-3a5e0d3c-1111-2222-3333-444455556666", "trident_pvc_3a5e0d3c_1111_2222_3333_444455556666"},
		{"trident-", "pvc.a", "trident_pvc_a"},
		{"", "my-vol", "my_vol"},
		{"trident_", "-lead", "trident_lead"}, // "__" collapses, as in Trident
	} {
		if got := volumeName(tc.prefix, tc.name); got != tc.want {
			t.Errorf("volumeName(%q, %q) = %q, want %q", tc.prefix, tc.name, got, tc.want)
		}
	}
	valid := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,202}$`)
	seen := map[string]string{}
	for _, name := range []string{long, long + "y", "ünïcode", "ünïcodé", "9lives", "a b", "a/b", "", strings.Repeat("é", 64)} {
		got := volumeName("", name)
		if !valid.MatchString(got) {
			t.Errorf("volumeName(%q) = %q is not a valid ONTAP volume name", name, got)
		}
		if got != volumeName("", name) {
			t.Errorf("volumeName(%q) is not deterministic", name)
		}
		if other, dup := seen[got]; dup {
			t.Errorf("%q and %q share ONTAP name %q", name, other, got)
		}
		seen[got] = name
	}
}

func TestPVNameFromVolume(t *testing.T) {
	for _, tc := range []struct {
		prefix, volume, want string
		ok                   bool
	}{
		{"trident_", "trident_pvc_3a5e0d3c_1111_2222_3333_444455556666", "pvc-3a5e0d3c-1111-2222-3333-444455556666", true},
		{"trident-", "trident_pvc_3a5e0d3c_1111_2222_3333_444455556666", "pvc-3a5e0d3c-1111-2222-3333-444455556666", true},
		{"trident_", "trident_pvc_notauuid", "", false},
		{"trident_", "other_pvc_3a5e0d3c_1111_2222_3333_444455556666", "", false},
		{"trident_", "trident_pvc_3A5E0D3C_1111_2222_3333_444455556666", "", false},
	} {
		got, ok := pvNameFromVolume(tc.prefix, tc.volume)
		if got != tc.want || ok != tc.ok {
			t.Errorf("pvNameFromVolume(%q, %q) = %q, %v", tc.prefix, tc.volume, got, ok)
		}
	}
}

func TestSnapshotName(t *testing.T) {
	for _, keep := range []string{"snapshot-3a5e0d3c-1111-2222-3333-444455556666", "CreateSnapshot-snapshot-maxlen-ABCD" + strings.Repeat("a", 93)} {
		if got := snapshotName(keep); got != keep {
			t.Errorf("snapshotName(%q) = %q, want it unchanged (as Trident)", keep, got)
		}
	}
	for _, odd := range []string{"a/b", "a,b", "a b", ".", "..", strings.Repeat("s", 300), "ünï"} {
		got := snapshotName(odd)
		if len(got) > maxSnapshotName || strings.ContainsAny(got, "/, ") || got == "." || got == ".." || !printableASCII(got) {
			t.Errorf("snapshotName(%q) = %q is not a valid ONTAP snapshot name", odd, got)
		}
	}
	if snapshotName("a/b") == snapshotName("a,b") {
		t.Error("distinct names collide")
	}
}

func TestIgroupName(t *testing.T) {
	id := nameUUID("x")
	if got := igroupName("worker-1", id); got != "worker-1-"+id {
		t.Errorf("igroupName = %q", got)
	}
	a := igroupName(strings.Repeat("n", 70)+"a", id)
	b := igroupName(strings.Repeat("n", 70)+"b", id)
	if len(a) > maxIgroupName || len(b) > maxIgroupName || a == b || !strings.HasSuffix(a, "-"+id) {
		t.Errorf("long node names: %q (%d), %q", a, len(a), b)
	}
	for name, want := range map[string]bool{
		"worker-1-" + id: true,
		"worker-1-9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a": true, // Trident's
		"worker-10-" + id:      false,
		"worker-1-trident":     false,
		"trident":              false,
		"xworker-1-" + id:      false,
		"worker-1-" + id + "x": false,
	} {
		if got := isNodeIgroup(name, "worker-1", id); got != want {
			t.Errorf("isNodeIgroup(%q): %v, want %v", name, got, want)
		}
	}
	// Trident truncates long node names to fit 96 characters.
	long := strings.Repeat("n", 80)
	if !isNodeIgroup(long[:59]+"-9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a", long, id) {
		t.Error("Trident's truncated igroup name not recognised")
	}
}

func TestNameUUID(t *testing.T) {
	u := nameUUID("ontap-csi:igroups:svm-uuid")
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(u) {
		t.Errorf("%q is not a version 5 UUID", u)
	}
	if u != nameUUID("ontap-csi:igroups:svm-uuid") || u == nameUUID("ontap-csi:igroups:other") {
		t.Error("nameUUID is not a function of its name")
	}
}

// FuzzNames: the ONTAP names both drivers derive from CSI names are names
// ONTAP takes (docs/design/ontap-rest.md §4.1), the same for the same input,
// and two CSI names share an ONTAP volume name only where Trident's own
// mapping makes them share it (so volumes Trident made are found): a name
// that had to be shortened or sanitized carries a hash of all of it.
func FuzzNames(f *testing.F) {
	f.Add("trident_", "pvc-3a5e0d3c-1111-2222-3333-444455556666", "pvc-3a5e0d3c-1111-2222-3333-444455556667", "node-1")
	f.Add("", "9lives", "ünïcode", strings.Repeat("n", 300))
	f.Add("t-", "a/b", "a b", "")
	validVolume := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,202}$`)
	validLUN := regexp.MustCompile(`^/vol/[A-Za-z_][A-Za-z0-9_]{0,202}/lun0$`)
	const installation = "6a1f9c2e-3b4d-5e6f-8a9b-0c1d2e3f4a5b"
	f.Fuzz(func(t *testing.T, prefix, a, b, node string) {
		if !validVolume.MatchString(tridentName(prefix)+"x") || len(prefix) > 64 {
			return // a storage prefix the backend config refuses
		}
		va, vb := volumeName(prefix, a), volumeName(prefix, b)
		if !validVolume.MatchString(va) || va != volumeName(prefix, a) {
			t.Fatalf("volumeName(%q, %q) = %q", prefix, a, va)
		}
		if va == vb && a != b && tridentName(prefix+a) != tridentName(prefix+b) {
			t.Fatalf("%q and %q share ONTAP volume %q", a, b, va)
		}
		if !validLUN.MatchString(lunPath(va)) {
			t.Fatalf("LUN path %q", lunPath(va))
		}
		if pv, ok := pvNameFromVolume(prefix, va); ok && volumeName(prefix, pv) != va {
			t.Fatalf("volume %q maps back to PV %q, which maps to %q", va, pv, volumeName(prefix, pv))
		}
		if sn := snapshotName(a); len(sn) > maxSnapshotName || !printableASCII(sn) || strings.ContainsAny(sn, "/,") || sn == "" || sn != snapshotName(a) {
			t.Fatalf("snapshotName(%q) = %q", a, sn)
		}
		if node == "" {
			return
		}
		ig := igroupName(node, installation)
		if len(ig) > maxIgroupName || !isAnyNodeIgroup(ig, installation) || !isNodeIgroup(ig, node, installation) {
			t.Fatalf("igroupName(%q) = %q", node, ig)
		}
		if other := igroupName(node+"x", installation); other == ig {
			t.Fatalf("nodes %q and %q share igroup %q", node, node+"x", ig)
		}
	})
}
