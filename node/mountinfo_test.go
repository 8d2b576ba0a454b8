package node

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	mount "k8s.io/mount-utils"
)

// TestMountsOfParsesAsMountUtils: the entries mountsOf finds for a path,
// parsing only the lines that contain it, are those of mount-utils' parse
// of the whole table, field for field: for every mount point of each
// table, and for paths that only appear as a root, a source or a prefix.
func TestMountsOfParsesAsMountUtils(t *testing.T) {
	const synthetic = `1 0 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro
22 1 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
30 1 0:44 / /var/lib/kubelet/pods/p1/volumes/kubernetes.io~csi/pvc-1/mount rw,relatime shared:40 master:3 - nfs4 10.0.0.1:/trident_pvc_1 rw,vers=4.1,rsize=65536,addr=10.0.0.1
31 1 0:44 / /var/lib/kubelet/pods/p1/volumes/kubernetes.io~csi/pvc-1/mount ro,relatime - nfs4 10.0.0.1:/trident_pvc_1 ro,vers=4.1
32 1 253:3 / /var/lib/kubelet/plugins/kubernetes.io/csi/pv/pvc-2/globalmount rw,relatime shared:41 - ext4 /dev/dm-3 rw,stripe=16
33 1 253:3 /sub /var/lib/kubelet/pods/p2/volumes/kubernetes.io~csi/pvc-2/mount rw,relatime - ext4 /dev/dm-3 rw
34 1 0:50 / /mnt/with\040space rw - tmpfs tmpfs rw,size=64k,"opt,with,commas"
35 1 0:51 /mnt/rootonly /mnt/other rw - tmpfs /mnt/sourceonly rw
36 1 0:52 / /var/lib/kubelet/pods/p1/volumes/kubernetes.io~csi/pvc-1/mount/inner rw - tmpfs tmpfs rw
`
	dir := t.TempDir()
	file := filepath.Join(dir, "mountinfo")
	if err := os.WriteFile(file, []byte(synthetic), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, table string
		extra       []string // paths to look up besides the table's mount points
	}{
		{"synthetic", file, []string{"/mnt/rootonly", "/mnt/sourceonly", "/var/lib/kubelet", "/mnt/with space", "/nowhere", "/", "/var/lib/kubelet/pods/p1/volumes/kubernetes.io~csi/pvc-1"}},
		{"this process's", "/proc/self/mountinfo", []string{"/nowhere"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			infos, err := mount.ParseMountInfo(tc.table)
			if err != nil {
				t.Fatal(err)
			}
			paths := append([]string(nil), tc.extra...)
			for _, mi := range infos {
				paths = append(paths, mi.MountPoint)
			}
			found := 0
			for _, p := range paths {
				want, err := mountsOfParsed(tc.table, p)
				if err != nil {
					t.Fatal(err)
				}
				got, err := mountsOf(tc.table, p)
				if err != nil {
					t.Fatalf("%s: %v", p, err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("%s:\n got %+v\nwant %+v", p, got, want)
				}
				found += len(got)
			}
			if found == 0 {
				t.Fatal("no path of the table was found")
			}
		})
	}
}

func TestReleaseBefore58(t *testing.T) {
	for _, tc := range []struct {
		release string
		want    bool
	}{
		{"4.18.0-553.el8_10.x86_64", true},
		{"5.7.19", true},
		{"5.8.0", false},
		{"6.1.0-18-amd64", false},
		{"6.18.44-fc-v1252", false},
		{"garbage", true},
		{"x.y.z", true},
	} {
		if got := releaseBefore58(tc.release); got != tc.want {
			t.Errorf("releaseBefore58(%q) = %v, want %v", tc.release, got, tc.want)
		}
	}
}
