package node

import (
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/ontap-csi/ontap-csi/server"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
	"github.com/ontap-csi/ontap-csi/test/shims/iscsi/shimtest"
)

// One NodeStageVolume and one NodeUnstageVolume of an iSCSI volume, through
// the real node/iscsi over the shims (multipath on) and the real mkfs and
// mount: every line either call logs carries the call's request id, so an
// operator can follow one stage from the tracking file through iscsiadm,
// multipath, mkfs and mount.
func TestISCSICallsLogTheirRequestID(t *testing.T) {
	shimtest.Available(t)
	pc, devDir, sysRoot := iscsiShimVolume(t)
	root := t.TempDir()
	cfg := Config{
		NodeID:      "node-1",
		KubeletDir:  filepath.Join(root, "kubelet"),
		TrackingDir: filepath.Join(root, "tracking"),
		LockDir:     filepath.Join(root, "locks"),
		DevDir:      devDir,
		SysRoot:     sysRoot,
	}
	staging := filepath.Join(cfg.KubeletDir, "plugins/kubernetes.io/csi/pv/pvc-reqid/globalmount")
	for _, dir := range []string{staging, cfg.TrackingDir} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	// Runs before the shims' cleanup, which cannot detach a mounted LUN.
	t.Cleanup(func() { _ = unix.Unmount(staging, unix.MNT_DETACH) })
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}

	logs := captureEntries(t)
	stage := server.WithRequestID(t.Context(), "req-stage")
	if _, err := s.NodeStageVolume(stage, &csi.NodeStageVolumeRequest{
		VolumeId: "pvc-reqid", StagingTargetPath: staging, PublishContext: pc,
		VolumeCapability: mountCapability("ext4", snw),
	}); err != nil {
		t.Fatal(err)
	}
	logs.check(t, "req-stage", "logged in to iSCSI portal", "attached iSCSI LUN", "LUN attached",
		"iscsiadm", "multipathd", "blkid", "mkfs.ext4", "mount")

	unstage := server.WithRequestID(t.Context(), "req-unstage")
	if _, err := s.NodeUnstageVolume(unstage, &csi.NodeUnstageVolumeRequest{VolumeId: "pvc-reqid", StagingTargetPath: staging}); err != nil {
		t.Fatal(err)
	}
	logs.check(t, "req-unstage", "flushed multipath map", "detached iSCSI LUN", "logged out of iSCSI portal",
		"umount", "multipath", "iscsiadm")
}

// iscsiShimVolume starts the simulator and the iSCSI shims (put in PATH for
// the test), maps a new LUN to the shims' initiator, and returns its
// publish context and the shims' /dev and /sys.
func iscsiShimVolume(t *testing.T) (pc map[string]string, devDir, sysRoot string) {
	sim, err := ontapsim.New(ontapsim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	url, err := sim.Start("127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	env := shimtest.Start(t, shimtest.Options{SimURL: url, Multipath: true})
	env.Setenv(t)
	san := shimtest.NewSAN(t, url)
	san.CreateIgroup("node-1", env.InitiatorIQN)
	lun := san.CreateLUN("vol_reqid", 64<<20)
	id := san.Map(lun, "node-1", -1)
	pc = map[string]string{
		"protocol": "block", "filesystemType": "ext4", "iscsiTargetIqn": san.Target,
		"iscsiLunNumber": strconv.Itoa(id), "iscsiTargetPortalCount": strconv.Itoa(len(san.Portals)),
		"iscsiLunSerial": lun.Serial, "iscsiInterface": "default", "sharedTarget": "false", "useCHAP": "false",
	}
	for i, p := range san.Portals {
		pc["p"+strconv.Itoa(i+1)] = p
	}
	return pc, env.DevDir, env.SysRoot
}

// entryLog records the message and fields of every log entry, at every
// level, after server.RequestIDHook has run, as the plugin's log would.
type entryLog struct {
	mu      sync.Mutex
	entries []logrus.Entry
}

func captureEntries(t *testing.T) *entryLog {
	l := &entryLog{}
	std := logrus.StandardLogger()
	oldHooks, oldLevel, oldOut := std.Hooks, std.GetLevel(), std.Out
	hooks := logrus.LevelHooks{}
	hooks.Add(server.RequestIDHook{})
	hooks.Add(l)
	std.ReplaceHooks(hooks)
	std.SetLevel(logrus.DebugLevel)
	std.SetOutput(testWriter{t})
	t.Cleanup(func() { std.ReplaceHooks(oldHooks); std.SetLevel(oldLevel); std.SetOutput(oldOut) })
	return l
}

func (l *entryLog) Levels() []logrus.Level { return logrus.AllLevels }

func (l *entryLog) Fire(e *logrus.Entry) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, logrus.Entry{Message: e.Message, Data: maps.Clone(e.Data)})
	return nil
}

// check asserts that every entry since the last check carries id, and that
// among them are the given messages or host tools (tool=...), so a check
// cannot pass on a trail that lost its lines.
func (l *entryLog) check(t *testing.T, id string, want ...string) {
	t.Helper()
	l.mu.Lock()
	entries := l.entries
	l.entries = nil
	l.mu.Unlock()
	seen := map[string]bool{}
	for _, e := range entries {
		if e.Data["req_id"] != id {
			t.Errorf("log line without request id %s: %q %v", id, e.Message, e.Data)
		}
		seen[e.Message] = true
		if tool, ok := e.Data["tool"].(string); ok {
			seen[tool] = true
		}
	}
	for _, w := range want {
		if !seen[w] {
			t.Errorf("call %s logged no %q", id, w)
		}
	}
}

// testWriter sends the log to the test's output, shown when it fails.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
