// Package cluster_test runs ontap-csi's node DaemonSet on a real
// single-node Kubernetes cluster (localcluster) through the rollouts that
// used to leave kubelet without the driver, while a workload keeps a volume
// mounted and another pod mounts and unmounts one all the time. See
// docs/e2e.md.
package cluster_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ontap-csi/ontap-csi/test/cluster/localcluster"
)

const driverName = "csi.trident.netapp.io"

// Simulator addresses inside the node's network namespace: the API (also
// the NFS shim's data plane) on the node IP, and an NFS data LIF that only
// exists as a name the shim passes back to the simulator.
const (
	simPort   = "8443"
	simNFSLIF = "10.250.0.20"
)

// hostTools are the Debian packages the cluster runs (docs/design/local-cluster.md §2).
var hostTools = map[string]string{
	"containerd": "containerd", "ctr": "containerd", "runc": "runc", "etcd": "etcd-server",
	"/usr/lib/cni/bridge": "containernetworking-plugins", "iptables": "iptables",
	"nsenter": "util-linux", "ip": "iproute2",
}

// suite is everything the scenarios share.
type suite struct {
	cluster *localcluster.Cluster
	obs     *observer
	ds      *nodeDS
	wl      *workload // nil until the workload runs
	bin     string    // built binaries
	report  *report
	ctrl    csi.ControllerClient
	simHTTP *http.Client
}

func TestNodePluginRollouts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the cluster e2e test needs root (namespaces, mounts, cgroups)")
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

	c, err := localcluster.Start(ctx, localcluster.Config{
		Kube:      a.kube,
		NodeNS:    filepath.Join(a.bin, "nodens"),
		Archives:  a.archives,
		NodeFiles: map[string]string{"/usr/sbin/mount.nfs": filepath.Join(a.bin, "mount.nfs"), "/usr/sbin/mount.nfs4": filepath.Join(a.bin, "mount.nfs")},
		Forwards:  map[string]string{"sim": net.JoinHostPort(localcluster.NodeIP, simPort)},
		Logf:      t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			keepArtifacts(t, c)
		}
		rep, err := c.Teardown()
		t.Logf("teardown in %s: killed %d processes, %d mounts undone, %d cgroups removed, sysctls restored %v",
			rep.Duration.Round(time.Millisecond), len(rep.NodeNS.Killed), rep.NodeNS.Unmounted, rep.NodeNS.CgroupsRemoved, rep.NodeNS.SysctlsRestored)
		if err != nil {
			t.Errorf("teardown left the host changed: %v", err)
		}
	})
	t.Logf("cluster up after %s", time.Since(started).Round(time.Second))

	s := &suite{cluster: c, bin: a.bin, report: newReport(reportCommand())}
	defer func() {
		if err := s.report.write(); err != nil {
			t.Error(err)
		}
		t.Logf("report: %s", s.report.path())
	}()
	s.setup(ctx, t, repo)

	for _, sc := range scenarios {
		if !sc.beforeWorkload && s.wl == nil {
			if err := s.startWorkload(ctx); err != nil {
				t.Fatalf("workload: %v", err)
			}
		}
		if !t.Run(sc.name, func(t *testing.T) { s.run(ctx, t, sc) }) && ctx.Err() != nil {
			break
		}
	}
}

// setup starts the simulator, the controller, the observer and the
// attacher, and installs deploy/ except the node DaemonSet, which the
// scenarios create.
func (s *suite) setup(ctx context.Context, t *testing.T, repo string) {
	c := s.cluster
	simDir := filepath.Join(c.Root, "sim")
	simAddr := net.JoinHostPort(localcluster.NodeIP, simPort)
	if _, err := c.StartProcess("ontap-sim", []string{filepath.Join(s.bin, "ontap-sim"),
		"--listen", simAddr, "--data-dir", simDir, "--nfs-lifs", simNFSLIF}, nil); err != nil {
		t.Fatal(err)
	}
	simCA := filepath.Join(simDir, "tls", "ca.pem")
	simHTTP, err := s.simClient(ctx, simCA)
	if err != nil {
		t.Fatal(err)
	}
	simURL := "https://" + simAddr

	ctrlSock := filepath.Join(c.Root, "controller", "csi.sock")
	backend, err := s.writeBackend(simAddr, simCA)
	if err != nil {
		t.Fatal(err)
	}
	// allInOne, not controller: ontap-csi's own node DaemonSet reports its
	// node (IPs, IQN) to no controller (it only does so to a Trident-style
	// controller through the trident-csi certificates), so a controller
	// alone would refuse every ControllerPublishVolume with "node not
	// found". In allInOne the node half reports this node in-process; it
	// is never registered with the kubelet, which only knows the
	// DaemonSet's pods.
	if _, err := c.StartProcess("ontap-csi-controller", []string{filepath.Join(s.bin, "ontap-csi"),
		"--csi_role=allInOne", "--csi_node_name=" + localcluster.NodeName,
		"--csi_endpoint=unix://" + ctrlSock, "--backend-config=" + backend,
		"--log_level=debug"}, nil); err != nil {
		t.Fatal(err)
	}
	conn, err := dialCSI(ctx, ctrlSock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctrl := csi.NewControllerClient(conn)

	m, err := renderBase(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.install(ctx, c.Client); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: workloadNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	s.obs = newObserver(c.Client, driverName)
	s.obs.start(ctx, c, []string{m.Namespace, workloadNS, legacyNS})
	go (&attacher{client: c.Client, csi: ctrl, driver: driverName, obs: s.obs}).run(ctx)

	s.ds = &nodeDS{client: c.Client, m: m, sim: simEndpoint{URL: simURL, CAFile: simCA}, obs: s.obs}
	s.ctrl = ctrl
	s.simHTTP = simHTTP
}

// startWorkload provisions the two volumes and starts the keeper and the
// churn; ontap-csi must be installed and registered.
func (s *suite) startWorkload(ctx context.Context) error {
	c := s.cluster
	if err := pollUntil(ctx, time.Minute, func() (bool, string, error) {
		ok, err := s.driverRegistered(ctx)
		return ok, "driver not in CSINode", err
	}); err != nil {
		return fmt.Errorf("the driver is not in CSINode: %w", err)
	}
	wl := &workload{client: c.Client, obs: s.obs, sim: s.simHTTP}
	for _, claim := range []string{keeperClaim, churnClaim} {
		if err := provision(ctx, c.Client, s.ctrl, claim); err != nil {
			return err
		}
	}
	if err := wl.startKeeper(ctx); err != nil {
		return err
	}
	go wl.churn(ctx)
	// One full churn cycle before the first scenario proves the data path.
	if err := pollUntil(ctx, 5*time.Minute, func() (bool, string, error) {
		cycles := wl.cyclesIn(time.Time{}, time.Now())
		if len(cycles) == 0 {
			return false, "no churn cycle yet", nil
		}
		if cycles[0].Err != "" {
			return false, "", fmt.Errorf("first churn cycle failed: %s", cycles[0].Err)
		}
		return true, "", nil
	}); err != nil {
		return err
	}
	s.wl = wl
	s.obs.add("test", "workload running: keeper and churn")
	return nil
}

// writeBackend writes the controller's backend: Trident's ontap-nas JSON
// pointing at the simulator, trusting its CA.
func (s *suite) writeBackend(simAddr, caFile string) (string, error) {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return "", err
	}
	b, err := json.MarshalIndent(map[string]any{
		"version":              1,
		"storageDriverName":    "ontap-nas",
		"backendName":          "e2e-nas",
		"managementLIF":        simAddr,
		"dataLIF":              simNFSLIF,
		"svm":                  "svm0",
		"username":             "admin",
		"password":             "password",
		"storagePrefix":        "e2e_",
		"trustedCACertificate": base64.StdEncoding.EncodeToString(ca),
		// Publishing adds the node's IP to the volume's export policy; the
		// NFS shim then checks that policy on every mount.
		"autoExportPolicy": true,
		"autoExportCIDRs":  []string{"10.250.0.0/24"},
		"defaults":         map[string]string{"unixPermissions": "0777"},
	}, "", "  ")
	if err != nil {
		return "", err
	}
	dir := filepath.Join(s.cluster.Root, "controller")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "backend.json")
	return path, os.WriteFile(path, b, 0o600)
}

// simClient waits for the simulator's CA and API, and returns a client that
// reaches it from outside the node's network namespace.
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
			TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: localcluster.NodeIP, MinVersion: tls.VersionTLS12},
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", sock)
			},
		}}
		resp, err := hc.Get("https://" + net.JoinHostPort(localcluster.NodeIP, simPort) + "/sim/info")
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
// before teardown removes it.
func keepArtifacts(t *testing.T, c *localcluster.Cluster) {
	dir := os.Getenv("E2E_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "ontap-csi-e2e-"+time.Now().UTC().Format("20060102T150405"))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("keeping logs: %v", err)
		return
	}
	for src, dst := range map[string]string{
		c.LogDir:                               filepath.Join(dir, "daemons"),
		c.NodePath("/var/log/pods"):            filepath.Join(dir, "pods"),
		c.NodePath("/var/lib/kubelet/plugins"): filepath.Join(dir, "kubelet-plugins"),
	} {
		if out, err := exec.Command("cp", "-r", "--no-dereference", src, dst).CombinedOutput(); err != nil {
			t.Logf("keeping %s: %v: %s", src, err, out)
		}
	}
	t.Logf("logs kept in %s", dir)
}
