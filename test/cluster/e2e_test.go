// Package cluster_test runs ontap-csi on a real Kubernetes cluster of two
// nodes (localcluster) as users run it: the node DaemonSet and the
// controller Deployment as deploy/ renders them, with the real csi-attacher,
// csi-snapshotter and snapshot-controller, and stand-ins for csi-provisioner
// and csi-resizer (sidecars/). The scenarios provision, attach, move,
// snapshot, expand and fail over volumes, and put the node plugin through
// the rollouts that used to leave kubelet without the driver, while a
// workload on every node keeps a volume mounted and another pod mounts and
// unmounts one all the time. See docs/e2e.md.
package cluster_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"

	"github.com/ontap-csi/ontap-csi/test/cluster/localcluster"
)

const driverName = "csi.trident.netapp.io"

// The simulator inside the first node's network namespace: the API (also
// the shims' data plane) on the node's address, data LIFs that only exist
// as names the shims pass back to it.
const (
	simPort     = "8443"
	simNFSLIF   = "10.250.0.20"
	simISCSILIF = "10.250.0.21,10.250.0.22"
	// clusterNodes: two kubelets are enough for every scenario (a volume
	// moving, a volume on two nodes at once, a node removed at the end);
	// a third would cost every scenario CPU on two cores.
	clusterNodes = 2
)

// hostTools are the Debian packages the cluster runs (docs/design/local-cluster.md §2).
var hostTools = map[string]string{
	"containerd": "containerd", "ctr": "containerd", "runc": "runc", "etcd": "etcd-server",
	"/usr/lib/cni/bridge": "containernetworking-plugins", "iptables": "iptables",
	"nsenter": "util-linux", "losetup": "util-linux", "ip": "iproute2", "mkfs.ext4": "e2fsprogs",
}

// suite is everything the scenarios share.
type suite struct {
	cluster *localcluster.Cluster
	dyn     dynamic.Interface
	inst    *installer
	obs     *observer
	m       *manifests
	ds      *nodeDS
	wl      []*workload // one per node; nil until the workload runs
	bin     string      // built binaries
	module  string      // test/cluster
	report  *report
	ontap   *ontap
	sim     simEndpoint
	// pvs are the PVs bound to claims of each scenario namespace, for the
	// report's view of that scenario's ONTAP objects (grouped scenarios
	// run at once, so the SVM's whole diff mixes theirs).
	pvsMu sync.Mutex
	pvs   map[string][]string
}

// boundPV notes that a claim of namespace ns is bound to pv.
func (s *suite) boundPV(ns, pv string) {
	s.pvsMu.Lock()
	defer s.pvsMu.Unlock()
	if s.pvs == nil {
		s.pvs = map[string][]string{}
	}
	if pv != "" && !hasString(s.pvs[ns], pv) {
		s.pvs[ns] = append(s.pvs[ns], pv)
	}
}

// ontapVolumesOf are the ONTAP volumes of the PVs bound in namespace ns.
func (s *suite) ontapVolumesOf(ns string) []string {
	s.pvsMu.Lock()
	defer s.pvsMu.Unlock()
	var out []string
	for _, pv := range s.pvs[ns] {
		out = append(out, ontapVolume(pv))
	}
	return out
}

func TestCluster(t *testing.T) {
	checkHost(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if dl, ok := t.Deadline(); ok {
		var c context.CancelFunc
		ctx, c = context.WithDeadline(ctx, dl.Add(-2*time.Minute))
		defer c()
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	repo, err := localcluster.FindRepoRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	a, err := buildArtifacts(ctx, t, repo, wd)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("binaries and images ready after %s", time.Since(started).Round(time.Second))
	s := &suite{bin: a.bin, module: wd, report: newReport(reportCommand())}
	s.cluster = startCluster(ctx, t, a)
	t.Logf("cluster up after %s", time.Since(started).Round(time.Second))
	defer func() {
		if err := s.report.write(); err != nil {
			t.Error(err)
		}
		t.Logf("report: %s", s.report.path())
	}()
	s.setup(ctx, t, repo)
	s.runAll(ctx, t)
}

func checkHost(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the cluster e2e test needs root (namespaces, mounts, cgroups, loop devices)")
	}
	var missing []string
	for tool, pkg := range hostTools {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, pkg)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("missing host packages (apt-get install %s)", strings.Join(missing, " "))
	}
}

// startCluster brings up the nodes with the shims installed as the host
// tools they stand in for, and registers the teardown.
func startCluster(ctx context.Context, t *testing.T, a artifacts) *localcluster.Cluster {
	shim := filepath.Join(a.bin, "iscsi-shim")
	c, err := localcluster.Start(ctx, localcluster.Config{
		Nodes:    clusterNodes,
		Kube:     a.kube,
		NodeNS:   filepath.Join(a.bin, "nodens"),
		Archives: a.archives,
		NodeFiles: map[string]string{
			"/usr/sbin/mount.nfs": filepath.Join(a.bin, "mount.nfs"), "/usr/sbin/mount.nfs4": filepath.Join(a.bin, "mount.nfs"),
			"/usr/sbin/iscsiadm": shim, "/usr/sbin/multipath": shim, "/usr/sbin/multipathd": shim,
		},
		NodeDirs: []string{iscsiShimDir},
		Forwards: map[string]string{"sim": net.JoinHostPort(localcluster.APIServerIP, simPort)},
		Logf:     t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("E2E_ARTIFACTS") != "" {
			keepArtifacts(t, c)
		}
		rep, err := c.Teardown()
		for i, nr := range rep.NodeNS {
			t.Logf("teardown of node %d: killed %d processes, %d mounts undone, %d cgroups removed, sysctls restored %v",
				len(rep.NodeNS)-i, len(nr.Killed), nr.Unmounted, nr.CgroupsRemoved, nr.SysctlsRestored)
		}
		t.Logf("teardown in %s", rep.Duration.Round(time.Millisecond))
		if err != nil {
			t.Errorf("teardown left the host changed: %v", err)
		}
	})
	return c
}

// simClient waits for the simulator's CA and API, and returns a client that
// reaches it from outside the nodes' network namespaces.
func (s *suite) simClient(ctx context.Context, caFile string) (*http.Client, error) {
	var hc *http.Client
	err := pollUntil(ctx, 2*time.Minute, func() (bool, string, error) {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return false, err.Error(), nil
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return false, "no certificate in " + caFile, nil
		}
		sock := s.cluster.ForwardSocket("sim")
		hc = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: localcluster.APIServerIP, MinVersion: tls.VersionTLS12},
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", sock)
			},
		}}
		resp, err := hc.Get("https://" + net.JoinHostPort(localcluster.APIServerIP, simPort) + "/sim/info")
		if err != nil {
			return false, err.Error(), nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status, nil
	})
	if err != nil {
		return nil, fmt.Errorf("ONTAP simulator: %w", err)
	}
	return hc, nil
}

// reportCommand names the command that produced the report: $E2E_COMMAND
// (make sets it), else the test binary's command line.
func reportCommand() string {
	if c := os.Getenv("E2E_COMMAND"); c != "" {
		return c
	}
	return strings.Join(append([]string{filepath.Base(os.Args[0])}, os.Args[1:]...), " ")
}

// keepArtifacts copies the daemons' and containers' logs out of the root
// before teardown removes it: when the test failed, or always when
// $E2E_ARTIFACTS names where.
func keepArtifacts(t *testing.T, c *localcluster.Cluster) {
	dir := os.Getenv("E2E_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "ontap-csi-e2e-"+time.Now().UTC().Format("20060102T150405"))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("keeping logs: %v", err)
		return
	}
	copies := map[string]string{c.LogDir: filepath.Join(dir, "daemons")}
	for _, n := range c.Nodes {
		copies[n.NodePath("/var/log/pods")] = filepath.Join(dir, n.Name, "pods")
		copies[n.NodePath("/var/lib/kubelet/plugins")] = filepath.Join(dir, n.Name, "kubelet-plugins")
		copies[filepath.Join(n.DirSource(iscsiShimDir), "state")] = filepath.Join(dir, n.Name, "iscsi-shim")
	}
	for src, dst := range copies {
		_ = os.MkdirAll(filepath.Dir(dst), 0o755)
		if out, err := exec.Command("cp", "-r", "--no-dereference", src, dst).CombinedOutput(); err != nil {
			t.Logf("keeping %s: %v: %s", src, err, out)
		}
	}
	t.Logf("logs kept in %s", dir)
}
