package guest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ontap-csi/ontap-csi/test/e2e/plugintest"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

// TestKernelDataPlaneSAN drives the simulator's kernel data plane with
// REST calls and the VM's own iscsiadm: a mapped LUN is visible through
// both portals with its serial, CHAP from the SVM's iSCSI security admits
// the right secret only, a resize shows after a rescan, and offline, unmap
// and delete take effect at once.
func TestKernelDataPlaneSAN(t *testing.T) {
	bin(t, "") // skips outside the VM
	s, lun, id := newSANSim(t)
	info, iqn := s.Info(), initiatorName(t)
	do := func(method, path string, body any) {
		t.Helper()
		if status, out, err := s.Do(method, path, body); err != nil || status >= 300 {
			t.Fatalf("%s %s: %d %v %v", method, path, status, out, err)
		}
	}
	do("POST", "/api/protocols/san/iscsi/credentials", map[string]any{"svm": map[string]any{"name": info.SVM}, "initiator": iqn,
		"authentication_type": "chap", "chap": map[string]any{"inbound": map[string]any{"user": "node1", "password": "secret-0123456"}}})
	portal := info.ISCSILIFs[0] + ":3260"
	node := loginWithCHAP(t, info.TargetIQN, portal, "node1", "secret-0123456")
	dev := diskByPath(t, "/dev/disk/by-path/ip-"+portal+"-iscsi-"+info.TargetIQN+"-lun-"+strconv.Itoa(id))
	disk := filepath.Join("/sys/block", filepath.Base(dev))
	if serial := readTrim(t, filepath.Join(disk, "device", "vpd_pg80")); !strings.HasSuffix(serial, lun.Serial) {
		t.Fatalf("VPD page 0x80 %q, want the LUN's serial %s", serial, lun.Serial)
	}
	if got := readTrim(t, filepath.Join(disk, "device", "vendor")); got != "NETAPP" {
		t.Errorf("vendor %q, want NETAPP", got)
	}

	do("PATCH", "/api/storage/luns/"+lun.UUID, map[string]any{"space": map[string]any{"size": 128 << 20}})
	writeFile(t, filepath.Join(disk, "device", "rescan"), "1")
	if got := readTrim(t, filepath.Join(disk, "size")); got != strconv.Itoa(128<<11) {
		t.Fatalf("size after grow and rescan: %s sectors, want %d", got, 128<<11)
	}
	// Offline: the LUN's data is gone from the initiator's view at once.
	// LIO answers for a missing LUN 0 with its virtual LUN 0 (32 KiB of
	// zeros, read-only) where ONTAP answers "logical unit not supported",
	// so a read may succeed, but never with the LUN's data.
	marker := strings.Repeat("ontap-csi marker ", 241)[:4096]
	markerFile := filepath.Join(t.TempDir(), "marker")
	writeFile(t, markerFile, marker)
	run(t, "dd", "if="+markerFile, "of="+dev, "bs=4k", "count=1", "oflag=direct")
	do("PATCH", "/api/storage/luns/"+lun.UUID, map[string]any{"enabled": false})
	if out, err := exec.Command("dd", "if="+dev, "bs=4k", "count=1", "iflag=direct", "status=none").Output(); err == nil && string(out) == marker {
		t.Fatal("an offline LUN's data is still read")
	}
	do("PATCH", "/api/storage/luns/"+lun.UUID, map[string]any{"enabled": true})
	acl := filepath.Join("/sys/kernel/config/target/iscsi", info.TargetIQN, "tpgt_1/acls", iqn, "lun_"+strconv.Itoa(id))
	if _, err := os.Stat(acl); err != nil {
		t.Fatalf("online again, no ACL LUN: %v", err)
	}
	do("DELETE", "/api/protocols/san/lun-maps/"+lun.UUID+"/"+igroupUUID(t, s, "g1"), nil)
	if _, err := os.Stat(acl); !os.IsNotExist(err) {
		t.Fatalf("unmapped, the ACL LUN is still there: %v", err)
	}
	do("DELETE", "/api/storage/luns/"+lun.UUID, nil)
	if bs, _ := filepath.Glob("/sys/kernel/config/target/core/fileio_*/" + lun.UUID); len(bs) > 0 {
		t.Fatalf("deleted, the backstore is still there: %v", bs)
	}
	run(t, "iscsiadm", append(node, "-u")...)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := os.Stat(disk); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is still there after logout", disk)
		}
	}
}

// newSANSim starts the simulator in-process with its kernel data plane and
// maps a 64 MiB LUN to an igroup holding the VM's initiator.
func newSANSim(t *testing.T) (*ontapsim.Simulator, ontapsim.LUNInfo, int) {
	t.Helper()
	s, err := ontapsim.New(ontapsim.Config{DataPlane: ontapsim.DataPlaneKernel, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = exec.Command("iscsiadm", "-m", "node", "--logoutall=all").Run()
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		plugintest.AssertNoKernelObjects(t)
	})
	if _, err := s.CreateVolume(ontapsim.VolumeSpec{Name: "v1", Size: 1 << 30}); err != nil {
		t.Fatal(err)
	}
	lun, err := s.CreateLUN(ontapsim.LUNSpec{Path: "/vol/v1/lun0", Size: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateIGroup("g1", "", "", initiatorName(t)); err != nil {
		t.Fatal(err)
	}
	id, err := s.MapLUN(lun.Path, "g1")
	if err != nil {
		t.Fatal(err)
	}
	return s, lun, id
}

// loginWithCHAP logs in to one portal with CHAP, after checking that a
// wrong secret is refused, and returns the node record's iscsiadm args.
func loginWithCHAP(t *testing.T, target, portal, user, secret string) []string {
	t.Helper()
	node := []string{"-m", "node", "-T", target, "-p", portal}
	run(t, "iscsiadm", append(node, "-o", "new")...)
	set := func(name, value string) { run(t, "iscsiadm", append(node, "-o", "update", "-n", name, "-v", value)...) }
	set("node.session.auth.authmethod", "CHAP")
	set("node.session.auth.username", user)
	set("node.session.auth.password", "wrong-"+secret)
	if out, err := exec.Command("iscsiadm", append(node, "-l")...).CombinedOutput(); err == nil {
		t.Fatalf("login with a wrong CHAP secret succeeded:\n%s", out)
	}
	set("node.session.auth.password", secret)
	run(t, "iscsiadm", append(node, "-l")...)
	run(t, "udevadm", "settle")
	return node
}

// diskByPath waits for udev's by-path link of a LUN and returns the disk
// it names. iscsiadm's login returns before the kernel's scan has added
// the disk, so a `udevadm settle` right after it can find udev's queue
// empty and return before the link exists (seen once under load: the disk
// attached a second after the login, the link was not there yet).
func diskByPath(t *testing.T, link string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		dev, err := filepath.EvalSymlinks(link)
		if err == nil {
			return dev
		}
		if time.Now().After(deadline) {
			t.Fatalf("no disk at %s after 30 s: %v", link, err)
		}
		run(t, "udevadm", "settle")
		time.Sleep(100 * time.Millisecond)
	}
}

func initiatorName(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile("/etc/iscsi/initiatorname.iscsi")
	if err != nil {
		t.Fatal(err)
	}
	_, name, _ := strings.Cut(strings.TrimSpace(string(b)), "=")
	return name
}

func igroupUUID(t testing.TB, s *ontapsim.Simulator, name string) string {
	t.Helper()
	for _, g := range s.IGroups() {
		if g.Name == name {
			return g.UUID
		}
	}
	t.Fatalf("no igroup %s", name)
	return ""
}

func readTrim(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Trim(string(b), " \n\x00")
}

func writeFile(t testing.TB, path, value string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(value), 0o600); err != nil {
		t.Fatal(err)
	}
}
