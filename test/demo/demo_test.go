// Package demo is `make demo`: ontap-csi's main job, on one machine with no
// cluster. The ONTAP simulator, a controller, and node plugins started and
// stopped as a DaemonSet would, against the real kubelet registration code
// (test/kubelet/cmd/kubeletsim); an NFS and an iSCSI volume published and
// kept busy by kubelet-style calls while the node plugin is rolled twice;
// then the same rollouts with Trident 20.10's node pod (a node-driver-
// registrar sidecar), which leave kubelet without the driver.
//
// It is a test so that it cleans up after itself whatever happens, and so
// that it fails when what it shows stops being true. `go test ./...` skips
// it: it builds Kubernetes code and runs for about two minutes.
package demo

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/registration"
	"github.com/ontap-csi/ontap-csi/test/e2e/plugintest"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

const (
	driver  = "csi.trident.netapp.io"
	nodeID  = "node-1"
	nodeIQN = "iqn.2005-03.org.open-iscsi:node-1"
	// nodeIP is the address the node mounts NFS exports from; the
	// volume's export policy admits it once the volume is published.
	nodeIP = "192.0.2.10"
	// registerTimeout only keeps a broken build from hanging the demo;
	// kubelet registers within its reconcile period (1 s, K2).
	registerTimeout = 30 * time.Second
)

func TestMain(m *testing.M) { plugintest.Main(m) }

// say prints a line of the demo's narrative.
func say(format string, args ...any) { fmt.Printf(format+"\n", args...) }

func TestDemo(t *testing.T) {
	if os.Getenv("ONTAP_CSI_DEMO") == "" {
		t.Skip("make demo runs this (ONTAP_CSI_DEMO=1)")
	}
	if os.Geteuid() != 0 {
		t.Fatal("the demo mounts NFS (shim) and iSCSI (loop devices) volumes: run it as root")
	}
	began := time.Now()
	tools := buildKubeletTools(t)
	say("building ontap-csi")
	bin := plugintest.Binary(t)

	say("\n== ontap-csi: two rollouts of the node plugin under load ==")
	ours := runOurs(t, bin, tools)
	say("\n== the same with Trident 20.10's node pod (trident-main + node-driver-registrar) ==")
	legacy := runLegacy(t, tools)

	say("\n== result ==")
	ours.print()
	legacy.print()
	say("\n(%s in all; kubelet's own log is in the temp roots while the demo runs)", time.Since(began).Round(time.Second))

	// What the demo shows must be true, or it fails.
	if ours.sum.DeregMillis != 0 || ours.sum.Deregistrations != 0 || !ours.sum.EndsRegistered {
		t.Errorf("ontap-csi: kubelet lost the driver (gap %.1f ms, %d DeRegisterPlugin, registered at the end: %t)",
			ours.sum.DeregMillis, ours.sum.Deregistrations, ours.sum.EndsRegistered)
	}
	if ours.sum.FailedCalls != 0 || len(ours.failures) != 0 {
		t.Errorf("ontap-csi: failed calls: %d through kubelet's lookup, data path %v", ours.sum.FailedCalls, ours.failures)
	}
	if legacy.sum.EndsRegistered {
		t.Errorf("the legacy run ended registered: the demo no longer shows the bug it is about")
	}
}

// run is what one run measured.
type run struct {
	title    string
	kubelet  *kubeletSim
	holders  map[uint64]string // generation → pod
	sum      simSummary
	stats    int
	mounts   int
	unmounts int
	failures []string
	dataPath bool
}

func (r *run) step(format string, args ...any) {
	say("%s  %s", r.kubelet.rel(time.Now()), fmt.Sprintf(format, args...))
}

// runOurs: simulator, controller, node plugin ds-1 registered, volumes
// published, load started; surge rollout to ds-2; DaemonSet-recreate
// rollout to ds-3; then everything undone.
func runOurs(t *testing.T, bin string, tools kubeletTools) *run {
	d := startOurs(t, tools)
	t1 := time.Now()
	ds1 := d.pod("ds-1")
	g1 := d.registered(t1, 0)
	vols := d.publishVolumes()
	l := d.startLoad(vols)
	time.Sleep(2 * time.Second)

	d.r.step("rollout 1, surge (maxSurge 1): start ds-2 beside ds-1")
	t2 := time.Now()
	ds2 := d.pod("ds-2")
	g2 := d.registered(t2, g1)
	d.r.step("ds-2 is ready; the DaemonSet controller deletes ds-1: SIGTERM")
	ds1.Terminate()
	<-ds1.Done()
	d.r.step("ds-1 exited")
	time.Sleep(2 * time.Second)

	d.r.step("rollout 2, DaemonSet deleted and created again (the seed's order): start ds-3, SIGTERM ds-2 once ds-3's socket exists")
	before := regSockets(t, d.roots.KubeletDir)
	t3 := time.Now()
	ds3 := d.pod("ds-3")
	waitNewSocket(t, d.roots.KubeletDir, before)
	ds2.Terminate()
	d.r.step("ds-2 got SIGTERM (terminating: it serves %s until ds-3 takes it over)", filepath.Base(d.endpoint))
	d.registered(t3, g2)
	<-ds2.Done()
	d.r.step("ds-2 exited")
	time.Sleep(2 * time.Second)

	d.stopLoad(l, vols)
	d.uninstall(bin, vols, ds3)
	return d.r
}

// ours is the demo's node with ontap-csi: the simulator, the iSCSI shim,
// the kubelet code, the controller and the node plugin pods.
type ours struct {
	t        *testing.T
	r        *run
	roots    plugintest.Roots
	sim      *plugintest.Sim
	iscsi    *plugintest.ISCSI
	ctrl     *plugintest.Plugin
	endpoint string // E: what kubelet dials (I3)
}

func startOurs(t *testing.T, tools kubeletTools) *ours {
	roots := plugintest.NewRoots(t)
	s := plugintest.StartSim(t, roots, ontapsim.Config{})
	iscsi := plugintest.StartISCSI(t, roots, s, nodeIQN)
	backendDir := filepath.Join(roots.Root, "backends")
	backends := []string{
		plugintest.WriteBackendConfig(t, backendDir, s.Simulator, config.DriverONTAPNAS, map[string]any{"autoExportPolicy": true}),
		plugintest.WriteBackendConfig(t, backendDir, s.Simulator, config.DriverONTAPSAN, nil),
	}
	r := &run{title: "ontap-csi", holders: map[uint64]string{}, dataPath: true}
	r.kubelet = startKubeletSim(t, tools.KubeletSim, roots.KubeletDir)
	r.step("kubelet started: plugin manager + CSI plugin of k8s.io/kubernetes v1.37.2, watching %s", filepath.Join(roots.KubeletDir, "plugins_registry"))
	r.step("ONTAP simulator at %s (NFS and iSCSI LIFs on loopback)", s.URL)

	// The controller Deployment's job, as csi-provisioner and csi-attacher
	// drive it. allInOne so that it knows the node without a cluster: its
	// node half reports this node (same name, IP and IQN) in-process.
	ctrl := plugintest.Start(t, plugintest.Options{Roots: plugintest.NewRoots(t), Sim: s, Backends: backends,
		NodeID: nodeID, NodeIPs: []string{nodeIP}, ISCSI: iscsi})
	r.step("controller up, backends ontap-nas and ontap-san")
	return &ours{t: t, r: r, roots: roots, sim: s, iscsi: iscsi, ctrl: ctrl,
		endpoint: filepath.Join(roots.KubeletDir, "plugins", driver, "csi-node.sock")}
}

// pod starts a node plugin pod of the DaemonSet.
func (d *ours) pod(name string) *plugintest.Plugin {
	pluginDir := filepath.Dir(d.endpoint)
	p := plugintest.Launch(d.t, plugintest.Options{Roots: d.roots, Role: "node", Sim: d.sim, NodeID: nodeID,
		NodeIPs: []string{nodeIP}, ISCSI: d.iscsi,
		Env: []string{"POD_NAME=" + name, "POD_UID=" + name + "-uid"},
		Args: []string{"--csi_endpoint=unix://" + filepath.Join(pluginDir, "csi.sock"),
			"--handover-grace=20s", "--metrics-address=", "--log_level=info"}})
	d.r.step("%s started (pid %d)", name, p.Pid())
	return p
}

// registered waits until kubelet registered a generation above `above`
// and names its pod from the lease.
func (d *ours) registered(since time.Time, above uint64) uint64 {
	c := d.r.kubelet.waitRegistered(d.t, since, registerTimeout, func(c kubeletCall) bool { return c.generation() > above })
	g := c.generation()
	d.r.holders[g] = leaseHolder(d.t, d.roots.KubeletDir, g)
	d.r.step("kubelet registered %s: generation %d at %s, %.0f ms after its start", d.r.holders[g], g, filepath.Base(c.Endpoint), c.At.Sub(since).Seconds()*1000)
	return g
}

// publishVolumes creates, stages and publishes an NFS and an iSCSI volume
// and writes a file on each.
func (d *ours) publishVolumes() []published {
	nfs := createAndStage(d.t, d.r, d.ctrl, d.endpoint, d.roots.KubeletDir, "pvc-demo-nfs", "ontap-nas",
		mountCapability("nfs", csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER))
	san := createAndStage(d.t, d.r, d.ctrl, d.endpoint, d.roots.KubeletDir, "pvc-demo-san", "ontap-san",
		mountCapability("ext4", csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER))
	vols := []published{nfs, san}
	for _, v := range vols {
		if err := os.WriteFile(filepath.Join(v.target, "hello.txt"), []byte("written before the rollouts\n"), 0o644); err != nil {
			d.t.Fatal(err)
		}
	}
	return vols
}

// startLoad starts kubelet's calls: stats on every volume, and a pod
// mounting and unmounting the NFS volume in a loop.
func (d *ours) startLoad(vols []published) *load {
	_, churnTarget, err := kubeletPaths(d.roots.KubeletDir, vols[0].id, "pod-churn")
	if err != nil {
		d.t.Fatal(err)
	}
	l := startLoad(d.endpoint, vols, churnTarget)
	d.r.step("load: NodeGetVolumeStats on every volume each 20 ms, and a pod mounting and unmounting %s in a loop, all through %s", vols[0].id, filepath.Base(d.endpoint))
	return l
}

// stopLoad stops the calls, counts them and checks the data survived.
func (d *ours) stopLoad(l *load, vols []published) {
	l.stop()
	d.r.stats, d.r.mounts, d.r.unmounts, d.r.failures = l.counts()
	d.r.step("load stopped: %d NodeGetVolumeStats, %d mounts, %d unmounts, %d failed", d.r.stats, d.r.mounts, d.r.unmounts, len(d.r.failures))
	for _, v := range vols {
		if b, err := os.ReadFile(filepath.Join(v.target, "hello.txt")); err != nil || string(b) != "written before the rollouts\n" {
			d.t.Errorf("%s: data written before the rollouts: %q, %v", v.label, b, err)
		}
	}
	d.r.step("data written before the rollouts reads back on both volumes")
	d.r.sum = d.r.kubelet.stop(d.t)
}

// uninstall undoes it all, as kubelet and the controller would, then
// deregisters and stops the last pod; nothing may be left.
func (d *ours) uninstall(bin string, vols []published, last *plugintest.Plugin) {
	for _, v := range vols {
		unstageAndDelete(d.t, context.Background(), d.ctrl, d.endpoint, v)
	}
	d.r.step("volumes unmounted, unstaged, unpublished and deleted")
	out, err := exec.Command(bin, "deregister", "--kubelet-dir="+d.roots.KubeletDir).CombinedOutput()
	if err != nil {
		d.t.Fatalf("ontap-csi deregister: %v\n%s", err, out)
	}
	last.Terminate()
	<-last.Done()
	d.r.step("uninstalled: ontap-csi deregister, ds-3 stopped")
	if mps := plugintest.MountPointsBelow(d.t, d.roots.Root); len(mps) > 0 {
		d.t.Errorf("mounts left: %v", mps)
	}
	plugintest.AssertNoISCSI(d.t, d.iscsi)
	plugintest.AssertONTAPClean(d.t, d.sim.Simulator)
}

// runLegacy: the same two rollouts with Trident 20.10's pod. Kubelet's
// lookup is sampled by kubeletsim; the data path is not, trident-main
// being an emulation without one.
func runLegacy(t *testing.T, tools kubeletTools) *run {
	roots := plugintest.NewRoots(t)
	r := &run{title: "legacy registrar", holders: map[uint64]string{}}
	r.kubelet = startKubeletSim(t, tools.KubeletSim, roots.KubeletDir)
	r.step("kubelet started (a fresh one)")
	regSock := filepath.Join(roots.KubeletDir, "plugins_registry", driver+"-reg.sock")
	pod := func(name string) *legacyPod {
		p := startLegacyPod(t, tools, roots.KubeletDir, name)
		r.step("%s started (trident-main + node-driver-registrar)", name)
		return p
	}
	registered := func(since time.Time, name string) {
		c := r.kubelet.waitRegistered(t, since, registerTimeout, func(kubeletCall) bool { return true })
		r.step("kubelet registered %s (version %s)", name, strings.Join(c.Versions, ","))
	}
	// replaced waits until the new registrar has put its own socket in
	// place (it removes the old one first).
	replaced := func(ino uint64) {
		for deadline := time.Now().Add(registerTimeout); inode(regSock) == 0 || inode(regSock) == ino; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the new registrar did not create its socket")
			}
		}
	}

	ds1 := pod("ds-1")
	registered(time.Now(), "ds-1")
	time.Sleep(2 * time.Second)

	r.step("rollout 1, surge: start ds-2 beside ds-1")
	ino := inode(regSock)
	since := time.Now()
	ds2 := pod("ds-2")
	replaced(ino)
	registered(since, "ds-2")
	r.step("ds-2 is ready; delete ds-1: SIGTERM — its registrar unlinks %s, which is ds-2's by now", filepath.Base(regSock))
	ds1.terminate(t)
	r.step("ds-1 exited")
	time.Sleep(2 * time.Second)

	r.step("rollout 2, DaemonSet deleted and created again: start ds-3, SIGTERM ds-2 once ds-3's socket exists")
	ino = inode(regSock)
	ds3 := pod("ds-3")
	replaced(ino)
	ds2.terminate(t)
	r.step("ds-2 exited")
	time.Sleep(3 * time.Second)
	r.sum = r.kubelet.stop(t)
	ds3.terminate(t)
	return r
}

// print prints a run's result: the holders of the registration over time,
// the deregistration gap, and the calls that failed.
func (r *run) print() {
	say("\n%s:", r.title)
	var regs []kubeletCall
	for _, c := range r.kubelet.Calls() {
		if c.Op == "RegisterPlugin" && c.Err == "" || c.Op == "DeRegisterPlugin" {
			regs = append(regs, c)
		}
	}
	sort.Slice(regs, func(i, j int) bool { return regs[i].At.Before(regs[j].At) })
	for i, c := range regs {
		until := "the end"
		if i+1 < len(regs) {
			until = strings.TrimSpace(r.kubelet.rel(regs[i+1].At))
		}
		if c.Op == "DeRegisterPlugin" {
			say("  %s  kubelet DeRegisterPlugin: no driver until %s", r.kubelet.rel(c.At), until)
			continue
		}
		who := r.holders[c.generation()]
		if who == "" {
			who = "version " + strings.Join(c.Versions, ",")
		} else {
			who = fmt.Sprintf("%s (generation %d)", who, c.generation())
		}
		say("  %s  registered: %s, until %s", r.kubelet.rel(c.At), who, until)
	}
	gap := fmt.Sprintf("%.0f ms", r.sum.DeregMillis)
	for _, g := range r.sum.DeregGaps {
		if g.Open {
			gap += fmt.Sprintf(", still open at the end (since %+.3fs)", g.From)
		}
	}
	say("  deregistration gap: %s; DeRegisterPlugin calls: %d; registered at the end: %t", gap, r.sum.Deregistrations, r.sum.EndsRegistered)
	say("  (sampled through kubelet's code: %d samples, %d more than 10 ms apart)", r.sum.RegisteredSamples, r.sum.LateSamples)
	say("  kubelet calls through its driver lookup (every 10 ms): %d made, %d failed", r.sum.Calls, r.sum.FailedCalls)
	if r.sum.FirstFailure != "" {
		say("    first: %s", r.sum.FirstFailure)
	}
	if r.sum.LastFailure != "" && r.sum.LastFailure != r.sum.FirstFailure {
		say("    last:  %s", r.sum.LastFailure)
	}
	if r.dataPath {
		say("  data path through the endpoint: %d NodeGetVolumeStats, %d mounts, %d unmounts, %d failed", r.stats, r.mounts, r.unmounts, len(r.failures))
		for i, f := range r.failures {
			if i == 5 {
				say("    …")
				break
			}
			say("    %s", f)
		}
	}
}

func mountCapability(fsType string, mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fsType}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
	}
}

// createAndStage creates a volume, publishes it to the node and stages and
// publishes it through E, as csi-provisioner, csi-attacher and kubelet do.
func createAndStage(t *testing.T, r *run, ctrl *plugintest.Plugin, endpoint, kubeletDir, name, backendType string, capability *csi.VolumeCapability) published {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	created, err := ctrl.Controller.CreateVolume(ctx, &csi.CreateVolumeRequest{
		Name: name, CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30},
		VolumeCapabilities: []*csi.VolumeCapability{capability},
		Parameters:         map[string]string{"backendType": backendType},
	})
	if err != nil {
		t.Fatalf("CreateVolume %s: %v", name, err)
	}
	vol := created.GetVolume()
	pub, err := ctrl.Controller.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{
		VolumeId: vol.GetVolumeId(), NodeId: nodeID, VolumeCapability: capability, VolumeContext: vol.GetVolumeContext(),
	})
	if err != nil {
		t.Fatalf("ControllerPublishVolume %s: %v", name, err)
	}
	staging, target, err := kubeletPaths(kubeletDir, vol.GetVolumeId(), "pod-"+name)
	if err != nil {
		t.Fatal(err)
	}
	v := published{label: map[string]string{"ontap-nas": "NFS", "ontap-san": "iSCSI"}[backendType], id: vol.GetVolumeId(), staging: staging, target: target,
		stage: &csi.NodeStageVolumeRequest{VolumeId: vol.GetVolumeId(), StagingTargetPath: staging, VolumeCapability: capability,
			PublishContext: pub.GetPublishContext(), VolumeContext: vol.GetVolumeContext()}}
	err = nodeCall(ctx, endpoint, func(ctx context.Context, n csi.NodeClient) error {
		if _, err := n.NodeStageVolume(ctx, v.stage); err != nil {
			return fmt.Errorf("NodeStageVolume: %w", err)
		}
		_, err := n.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: v.id, StagingTargetPath: staging, TargetPath: target,
			VolumeCapability: capability, PublishContext: v.stage.PublishContext, VolumeContext: v.stage.VolumeContext})
		if err != nil {
			return fmt.Errorf("NodePublishVolume: %w", err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	r.step("%s volume %s: created on ONTAP, published to %s, staged and mounted at %s", v.label, v.id, nodeID, target)
	return v
}

func unstageAndDelete(t *testing.T, ctx context.Context, ctrl *plugintest.Plugin, endpoint string, v published) {
	t.Helper()
	err := nodeCall(ctx, endpoint, func(ctx context.Context, n csi.NodeClient) error {
		if _, err := n.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: v.id, TargetPath: v.target}); err != nil {
			return fmt.Errorf("NodeUnpublishVolume: %w", err)
		}
		// Kubelet retries a failed unstage; so does the demo, a few times,
		// and says so.
		var err error
		for try := 1; try <= 5; try++ {
			if _, err = n.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: v.id, StagingTargetPath: v.staging}); err == nil {
				return nil
			}
			say("  NodeUnstageVolume %s, try %d: %v", v.id, try, err)
			time.Sleep(time.Second)
		}
		return fmt.Errorf("NodeUnstageVolume: %w", err)
	})
	if err != nil {
		t.Fatalf("%s: %v", v.id, err)
	}
	if _, err := ctrl.Controller.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: v.id, NodeId: nodeID}); err != nil {
		t.Fatalf("ControllerUnpublishVolume %s: %v", v.id, err)
	}
	if _, err := ctrl.Controller.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: v.id}); err != nil {
		t.Fatalf("DeleteVolume %s: %v", v.id, err)
	}
}

// leaseHolder names the pod the node lease gives generation g to, read as
// `ontap-csi status` reads it.
func leaseHolder(t *testing.T, kubeletDir string, g uint64) string {
	t.Helper()
	st, err := registration.Status(filepath.Join(kubeletDir, "plugins", driver), filepath.Join(kubeletDir, "plugins_registry"), driver)
	if err != nil || st.Lease == nil {
		t.Fatalf("lease: %v", err)
	}
	if st.Lease.Generation != g {
		return fmt.Sprintf("generation %d", g)
	}
	return st.Lease.Holder.Pod
}

// regSockets lists plugins_registry.
func regSockets(t *testing.T, kubeletDir string) map[string]bool {
	t.Helper()
	ents, _ := os.ReadDir(filepath.Join(kubeletDir, "plugins_registry"))
	out := map[string]bool{}
	for _, e := range ents {
		out[e.Name()] = true
	}
	return out
}

// waitNewSocket waits until a registration socket not in before appears.
func waitNewSocket(t *testing.T, kubeletDir string, before map[string]bool) {
	t.Helper()
	for deadline := time.Now().Add(registerTimeout); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		for name := range regSockets(t, kubeletDir) {
			if !before[name] && !strings.HasPrefix(name, ".") {
				return
			}
		}
	}
	t.Fatal("no new registration socket appeared")
}

func inode(path string) uint64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}
