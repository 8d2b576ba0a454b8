package e2e

import (
	"strconv"
	"testing"

	"github.com/ontap-csi/ontap-csi/test/e2e/plugintest"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

// iscsiEnv is the iSCSI side of a rig: the node's initiator (the shims
// with nodeIQN, fake /dev and /sys and multipathd running; or the real
// kernel's) and the SVM's iSCSI target.
type iscsiEnv struct {
	host    *plugintest.ISCSI
	iqn     string   // the node's initiator name
	target  string   // the SVM's target IQN
	portals []string // its iSCSI LIFs
	// igroup holds the node's initiator for LUNs the tests map
	// themselves, as Trident 20.10's backend-wide igroup did; made on
	// first use, so that a test that leaves everything to the controller
	// ends with an empty SVM.
	igroup string
}

func newISCSIEnv(t testing.TB, r *rig) *iscsiEnv {
	t.Helper()
	info := r.sim.Info()
	host := plugintest.StartISCSI(t, r.Roots, r.sim, nodeIQN)
	return &iscsiEnv{host: host, iqn: host.InitiatorIQN, target: info.TargetIQN, portals: info.ISCSILIFs}
}

// attachedOnce checks the LUN is attached exactly once: one device per
// portal (session), one multipath map.
func (e *iscsiEnv) attachedOnce(t testing.TB, serial string, paths int) {
	t.Helper()
	maps, devices := e.host.Attachment(t, serial)
	if maps != 1 || devices != paths {
		t.Errorf("LUN %s: %d maps and %d path devices, want 1 and %d", serial, maps, devices, paths)
	}
}

// iscsiVolume is a LUN set up the way a controller would have: a volume
// holding lun0, mapped to the node.
type iscsiVolume struct {
	id      string
	lun     ontapsim.LUNInfo
	lunID   int
	context map[string]string // Trident's publish context for it
}

// makeISCSIVolume sets up a LUN of size bytes directly on ONTAP, mapped to
// the tests' igroup, and returns it with the publish context Trident's
// controller hands the node.
func (r *rig) makeISCSIVolume(id string, size int64, fsType string) iscsiVolume {
	r.t.Helper()
	e := r.iscsi
	if e.igroup == "" {
		e.igroup = "trident-" + nodeID
		if _, err := r.sim.CreateIGroup(e.igroup, "", "", e.iqn); err != nil {
			r.t.Fatal(err)
		}
	}
	name := "trident_" + filepathSafe(id)
	if _, err := r.sim.CreateVolume(ontapsim.VolumeSpec{Name: name, Size: size*2 + 64<<20, Thin: true}); err != nil {
		r.t.Fatal(err)
	}
	lun, err := r.sim.CreateLUN(ontapsim.LUNSpec{Path: "/vol/" + name + "/lun0", Size: size})
	if err != nil {
		r.t.Fatal(err)
	}
	lunID, err := r.sim.MapLUN(lun.Path, e.igroup)
	if err != nil {
		r.t.Fatal(err)
	}
	pc := map[string]string{
		"protocol": "block", "filesystemType": fsType, "iscsiTargetIqn": e.target,
		"iscsiLunNumber": strconv.Itoa(lunID), "iscsiTargetPortalCount": strconv.Itoa(len(e.portals)),
		"iscsiLunSerial": lun.Serial, "iscsiInterface": "default", "iscsiIgroup": e.igroup,
		"useCHAP": "false", "sharedTarget": "false",
	}
	for i, p := range e.portals {
		pc["p"+strconv.Itoa(i+1)] = p
	}
	return iscsiVolume{id: id, lun: lun, lunID: lunID, context: pc}
}

// resizeLUN grows a LUN on ONTAP, as ControllerExpandVolume would.
func (r *rig) resizeLUN(lun ontapsim.LUNInfo, size int64) {
	r.t.Helper()
	if _, _, err := r.sim.Do("PATCH", "/api/storage/luns/"+lun.UUID, map[string]any{"space": map[string]any{"size": size}}); err != nil {
		r.t.Fatal(err)
	}
}

// lunFile is the simulator's backing file of the LUN with serial.
func (r *rig) lunFile(serial string) string {
	r.t.Helper()
	for _, l := range r.sim.LUNs() {
		if l.Serial == serial {
			return l.File
		}
	}
	r.t.Fatalf("no LUN with serial %s in the simulator", serial)
	return ""
}
