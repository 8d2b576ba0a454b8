package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"sigs.k8s.io/yaml"

	"github.com/ontap-csi/ontap-csi/test/ontapsim"
	"github.com/ontap-csi/ontap-csi/test/tridentcerts"
)

// TestTridentOperatorObjects runs the binary as trident-operator 20.10 and
// 26.06 deploy Trident, with only the image changed: the node DaemonSet's and
// the controller Deployment's args, env and mounts (docs/design/trident-compat.md §2),
// the trident-csi certificates at /certs, the service account token, a
// Kubernetes API (fakeAPI) with a TridentBackendConfig, and an ONTAP
// (the simulator). A stand-in for kubelet takes the node registrations.
func TestTridentOperatorObjects(t *testing.T) {
	// Beside TestTridentContainerArgs: both spend most of their time in
	// the node role's --handover-grace after SIGTERM.
	t.Parallel()
	for _, v := range []string{"20.10", "26.06"} {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			testOperatorObjects(t, v)
		})
	}
}

const (
	ontapPassword   = "ontap-Secret-pw"
	controllerToken = "controller-sa-token"
	nodeToken       = "node-sa-token"
)

// controllerRBAC is every "verb resource" the controller may call: the
// grants deploy/ adds for it (TridentBackendConfigs and their status, the
// credential Secrets, TridentNodes, Nodes for topology labels), and the
// PersistentVolumes and StorageClasses the metrics count, which Trident's
// own controller role may list too; a volume's PV and TridentVolume for
// its ONTAP name, and the claim of a CreateVolume (listed to find it by
// UID), which Trident's role (20.10 and 26.06,
// cli/k8s_client/yaml_factory.go) may get and list.
var controllerRBAC = []string{
	"get persistentvolumes", "get tridentvolumes", "get persistentvolumeclaims", "list persistentvolumeclaims",
	"list tridentbackendconfigs", "watch tridentbackendconfigs", "update tridentbackendconfigs",
	"update tridentbackendconfigs/status", "get secrets", "get nodes", "list persistentvolumes", "list storageclasses",
	"get tridentnodes", "list tridentnodes", "create tridentnodes", "update tridentnodes", "delete tridentnodes",
}

type cluster struct {
	root    string
	certs   tridentcerts.Dir
	api     *fakeAPI
	netns   string // the cluster network: API, ONTAP, controller, worker-1
	isolate string // worker-2's network: the API, but no controller
	saCtrl  string
	saNode  string
	sim     *ontapsim.Simulator
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	c := &cluster{root: shortTempDir(t)}
	var err error
	if c.certs, err = tridentcerts.Write(filepath.Join(c.root, "certs")); err != nil {
		t.Fatal(err)
	}
	c.saCtrl, c.saNode = c.serviceAccount(t, "sa-ctrl", controllerToken), c.serviceAccount(t, "sa-node", nodeToken)
	c.api = newFakeAPI(map[string]string{controllerToken: "controller", nodeToken: "node"})
	t.Cleanup(c.api.close)
	for _, name := range []string{"worker-1", "worker-2"} {
		c.api.put(collectionOf("nodes"), map[string]any{"metadata": map[string]any{"name": name, "labels": map[string]any{
			"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": "zone-" + name,
		}}})
	}
	c.netns, c.isolate = startSandbox(t), startSandbox(t)
	cert, err := tls.LoadX509KeyPair(c.certs.Path(tridentcerts.ServerCert), c.certs.Path(tridentcerts.ServerKey))
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{c.netns, c.isolate} {
		l, err := listenIn(ns, "127.0.0.1:6443")
		if err != nil {
			t.Fatal(err)
		}
		srv := c.api.serve(l, cert)
		t.Cleanup(func() { srv.Close() })
	}

	// ONTAP, reachable from the cluster network over TLS.
	if c.sim, err = ontapsim.New(ontapsim.Config{Password: ontapPassword}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.sim.Close() })
	l, err := listenIn(c.netns, "127.0.0.1:9443")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: c.sim.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{cert}})) }()
	t.Cleanup(func() { srv.Close() })
	ca, _ := os.ReadFile(c.certs.Path(tridentcerts.CACert))
	c.api.put(collectionOf("secrets"), map[string]any{
		"metadata": map[string]any{"name": "ontap-creds", "namespace": fakeNamespace},
		"data": map[string]any{
			"username": base64.StdEncoding.EncodeToString([]byte("admin")),
			"password": base64.StdEncoding.EncodeToString([]byte(ontapPassword)),
		},
	})
	c.putClaimAndClasses()
	c.api.put(collectionOf("tridentbackendconfigs"), map[string]any{
		"metadata": map[string]any{"name": "backend-san", "namespace": fakeNamespace, "uid": "tbc-uid-1"},
		"spec": map[string]any{
			"version": 1, "storageDriverName": "ontap-san", "backendName": "san",
			"managementLIF": "127.0.0.1:9443", "svm": "svm0", "trustedCACertificate": string(ca),
			"credentials": map[string]any{"name": "ontap-creds"},
		},
	})
	return c
}

func (c *cluster) serviceAccount(t *testing.T, dir, token string) string {
	t.Helper()
	sa := filepath.Join(c.root, dir)
	ca, err := os.ReadFile(c.certs.Path(tridentcerts.CACert))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(sa, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"token": []byte(token), "ca.crt": ca, "namespace": []byte(fakeNamespace)} {
		if err := os.WriteFile(filepath.Join(sa, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return sa
}

func tridentArgs(t *testing.T, name string) []string {
	t.Helper()
	for _, tc := range tridentContainers {
		if tc.name == name {
			return tc.args
		}
	}
	t.Fatalf("no Trident container %q", name)
	return nil
}

func tridentIgnoredOf(t *testing.T, name string) []string {
	t.Helper()
	for _, tc := range tridentContainers {
		if tc.name == name {
			return tc.ignored
		}
	}
	t.Fatalf("no Trident container %q", name)
	return nil
}

func envList(env map[string]string) []string {
	var out []string
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// startController runs the controller Deployment's trident-main container.
func (c *cluster) startController(t *testing.T, v string) (*container, string) {
	t.Helper()
	plugin := filepath.Join(c.root, "ctrl-plugin") // emptyDir socket-dir
	if err := os.MkdirAll(plugin, 0o755); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"KUBE_NODE_NAME": "worker-1", "CSI_ENDPOINT": "unix://plugin/csi.sock", "TRIDENT_SERVER": "127.0.0.1:8000",
		"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": "6443",
	}
	if v == "26.06" {
		env["POD_NAMESPACE"] = fakeNamespace
	}
	ctr := startContainer(t, containerSpec{
		NetNS: c.netns,
		Mounts: []mountSpec{
			{Source: plugin, Target: "/plugin"},
			{Source: string(c.certs), Target: "/certs", ReadOnly: true},
			{Source: c.saCtrl, Target: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true},
		},
		Argv: append([]string{"/trident_orchestrator"}, expandK8s(tridentArgs(t, v+" controller Deployment"), env)...),
		Env:  envList(env),
	})
	return ctr, filepath.Join(plugin, "csi.sock")
}

// nodeHost is one node's host filesystem.
type nodeHost struct {
	name, root, iqn string
}

func (c *cluster) newNodeHost(t *testing.T, name string) *nodeHost {
	t.Helper()
	h := &nodeHost{name: name, root: filepath.Join(c.root, name), iqn: "iqn.2026-12.io.example:" + name}
	for _, d := range []string{"usr/bin", "etc/iscsi", "var/lib/kubelet/plugins/csi.trident.netapp.io", "var/lib/kubelet/pods",
		"var/lib/kubelet/plugins_registry", "var/lib/trident/tracking"} {
		if err := os.MkdirAll(filepath.Join(h.root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(h.root, "etc/iscsi/initiatorname.iscsi"), []byte("## generated\nInitiatorName="+h.iqn+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *nodeHost) path(p string) string { return filepath.Join(h.root, p) }

// startNode runs the node DaemonSet's trident-main container on h, with
// the DaemonSet's hostPath mounts pointing into h.
func (c *cluster) startNode(t *testing.T, v string, h *nodeHost, netns string) *container {
	t.Helper()
	kubelet := "/var/lib/kubelet"
	env := map[string]string{
		"KUBE_NODE_NAME": h.name, "CSI_ENDPOINT": "unix://plugin/csi.sock", "PATH": "/netapp:/bin",
		"TRIDENT_CSI_SERVICE_HOST": "127.0.0.1", "TRIDENT_CSI_SERVICE_PORT": "8443",
		"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": "6443",
	}
	if v == "26.06" {
		env["KUBELET_DIR"] = kubelet
	}
	return startContainer(t, containerSpec{
		NetNS:  netns,
		Mounts: c.nodeMounts(h),
		Argv:   append([]string{"/trident_orchestrator"}, expandK8s(tridentArgs(t, v+" node DaemonSet"), env)...),
		Env:    envList(env),
	})
}

// nodeMounts are the node DaemonSet's volumes (docs/design/trident-compat.md §2.1),
// their host paths in h.
func (c *cluster) nodeMounts(h *nodeHost) []mountSpec {
	const kubelet = "/var/lib/kubelet"
	return []mountSpec{
		{Source: h.path(kubelet + "/plugins/csi.trident.netapp.io"), Target: "/plugin"},
		{Source: h.path(kubelet + "/plugins"), Target: kubelet + "/plugins"},
		{Source: h.path(kubelet + "/pods"), Target: kubelet + "/pods"},
		{Source: h.root, Target: "/host"},
		{Source: h.path("/var/lib/trident/tracking"), Target: "/var/lib/trident/tracking"},
		{Source: string(c.certs), Target: "/certs", ReadOnly: true},
		{Source: c.saNode, Target: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true},
	}
}

// kubelet stands in for kubelet's plugin watcher on one node: it takes every
// registration socket that appears and registers it.
type kubelet struct {
	mu       sync.Mutex
	endpoint string // host path of the registered endpoint
	sockets  []string
	err      error
}

func startKubelet(t *testing.T, h *nodeHost) *kubelet {
	k := &kubelet{}
	regDir := h.path("/var/lib/kubelet/plugins_registry")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		seen := map[string]bool{}
		for ctx.Err() == nil {
			entries, _ := os.ReadDir(regDir)
			for _, e := range entries {
				if n := e.Name(); !strings.HasPrefix(n, ".") && strings.HasSuffix(n, "-reg.sock") && !seen[n] {
					seen[n] = true
					k.register(ctx, h, filepath.Join(regDir, n))
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return k
}

func (k *kubelet) register(ctx context.Context, h *nodeHost, sock string) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err == nil {
		defer conn.Close()
		rc := registerapi.NewRegistrationClient(conn)
		var info *registerapi.PluginInfo
		if info, err = rc.GetInfo(ctx, &registerapi.InfoRequest{}); err == nil {
			if info.Name != "csi.trident.netapp.io" || info.Type != registerapi.CSIPlugin {
				err = fmt.Errorf("GetInfo = %v", info)
			} else {
				_, err = rc.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true})
				if err == nil {
					k.mu.Lock()
					k.endpoint = h.path(info.Endpoint)
					k.sockets = append(k.sockets, sock)
					k.mu.Unlock()
				}
			}
		}
	}
	if err != nil {
		k.mu.Lock()
		k.err = fmt.Errorf("registering %s: %w", sock, err)
		k.mu.Unlock()
	}
}

func (k *kubelet) registered(t *testing.T) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		k.mu.Lock()
		ep, err := k.endpoint, k.err
		k.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if ep != "" {
			return ep
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the node plugin never offered kubelet a registration")
	return ""
}

// httpsIn is a client in a network namespace: kubelet's HTTPS prober (no
// verification) without a client certificate, or a node plugin's client.
func httpsIn(netns string, conf *tls.Config) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: dialerIn(netns), TLSClientConfig: conf, DisableKeepAlives: true}}
}

func (c *cluster) nodeClientTLS(t *testing.T) *tls.Config {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(c.certs.Path(tridentcerts.ClientCert), c.certs.Path(tridentcerts.ClientKey))
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := os.ReadFile(c.certs.Path(tridentcerts.CACert))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	return &tls.Config{RootCAs: pool, ServerName: "trident-csi", Certificates: []tls.Certificate{pair}}
}

func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func eventually(t *testing.T, what string, timeout time.Duration, ok func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		good, last := ok()
		if good {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: never; last: %s", what, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// exec runs argv in a fresh container on the network netns, as kubelet
// runs an exec probe or the operator a command, and returns its exit code
// and output.
func execIn(t *testing.T, netns string, argv ...string) (int, string) {
	t.Helper()
	ctr := startContainer(t, containerSpec{NetNS: netns, Argv: argv})
	select {
	case <-ctr.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("%v did not finish", argv)
	}
	return ctr.cmd.ProcessState.ExitCode(), ctr.logs()
}

func testOperatorObjects(t *testing.T, v string) {
	c := newCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	checkVersionPod(t)
	ctrl, conn := c.startOperatorController(ctx, t, v)
	w1, n1, ctrlAPI := c.startReachableNode(ctx, t, v)
	w2, n2 := c.startUnreachableNode(ctx, t, v)

	// The controller provisions on the TridentBackendConfig's backend and
	// publishes to the node the TridentNode describes: the node's IQN ends up
	// in its igroup on ONTAP.
	cc := csi.NewControllerClient(conn)
	vol, capability := c.publishToWorker1(ctx, t, cc, "pvc-e2e", w1)
	_, err := cc.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{
		VolumeId: vol.VolumeId, NodeId: "worker-2", VolumeCapability: capability,
	})
	if status.Code(err) != codes.NotFound {
		t.Errorf("publish to a node that never registered: %v, want NotFound", err)
	}

	if _, err := cc.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap-e2e", SourceVolumeId: vol.VolumeId}); err != nil {
		t.Fatalf("CreateSnapshot: %v", err)
	}

	// A restarted controller keeps the node records and the backend.
	if code := ctrl.stop(t); code != 0 {
		t.Fatalf("controller exit %d after SIGTERM", code)
	}
	ctrl2, ctrlSock2 := c.startController(t, v)
	conn2 := dial(t, ctrl2.proc, ctrlSock2)
	eventually(t, "worker-1 known after a controller restart", 30*time.Second, func() (bool, string) {
		code, body := get(t, ctrlAPI, "https://127.0.0.1:8443/trident/v1/node/worker-1")
		return code == http.StatusOK && strings.Contains(body, w1.iqn), body
	})
	eventually(t, "publish after a controller restart", 60*time.Second, func() (bool, string) {
		_, err := csi.NewControllerClient(conn2).ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{
			VolumeId: vol.VolumeId, NodeId: "worker-1", VolumeCapability: capability,
		})
		return err == nil, fmt.Sprint(err)
	})
	// Its first listing of the backend has the volume and the snapshot:
	// Trident's series, the volume info join, and the dashboard.
	c.checkTridentMetrics(t)
	c.checkControllers(t, v, ctrl, ctrl2)
	stopNodesRegistered(t, []*container{n1, n2}, []*nodeHost{w1, w2})
}

// checkVersionPod runs what the operator's transient version pod does:
// `tridentctl pause`, then `/bin/tridentctl version --client -o yaml`,
// which must name its release.
func checkVersionPod(t *testing.T) {
	code, out := execIn(t, "", "/bin/tridentctl", "version", "--client", "-o", "yaml")
	var clientVersion struct {
		Client struct{ Version, GoVersion string } `json:"client"`
	}
	if err := yaml.Unmarshal([]byte(out), &clientVersion); code != 0 || err != nil || !strings.HasPrefix(clientVersion.Client.Version, tridentVersion+"+") {
		t.Fatalf("tridentctl version --client -o yaml: exit %d, %v:\n%s", code, err, out)
	}
	pause := startContainer(t, containerSpec{Argv: []string{"tridentctl", "pause"}})
	time.Sleep(200 * time.Millisecond)
	select {
	case <-pause.done:
		t.Fatalf("tridentctl pause exited: %s", pause.logs())
	default:
	}
	_ = pause.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-pause.done:
		// Exit 0, or killed by the SIGTERM if it came before the handler.
		ws, _ := pause.cmd.ProcessState.Sys().(syscall.WaitStatus)
		if code := pause.cmd.ProcessState.ExitCode(); code != 0 && !(ws.Signaled() && ws.Signal() == syscall.SIGTERM) {
			t.Errorf("tridentctl pause after SIGTERM: %v", pause.cmd.ProcessState)
		}
	case <-time.After(30 * time.Second):
		t.Error("tridentctl pause ignored SIGTERM")
	}
}

// startOperatorController starts the controller Deployment and checks what
// the sidecars and the operator ask of it first, until its backend from the
// TridentBackendConfig and its Secret is bound.
func (c *cluster) startOperatorController(ctx context.Context, t *testing.T, v string) (*container, *grpc.ClientConn) {
	ctrl, ctrlSock := c.startController(t, v)
	conn := dial(t, ctrl.proc, ctrlSock)
	// The sidecars' first calls: Identity, then the controller's capabilities.
	id := csi.NewIdentityClient(conn)
	if info, err := id.GetPluginInfo(ctx, &csi.GetPluginInfoRequest{}); err != nil || info.Name != "csi.trident.netapp.io" || info.VendorVersion == "" {
		t.Fatalf("controller GetPluginInfo = %v, %v", info, err)
	}
	if probe, err := id.Probe(ctx, &csi.ProbeRequest{}); err != nil || !probe.GetReady().GetValue() {
		t.Fatalf("controller Probe = %v, %v", probe, err)
	}
	pcaps, err := id.GetPluginCapabilities(ctx, &csi.GetPluginCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	hasController := false
	for _, c := range pcaps.Capabilities {
		hasController = hasController || c.GetService().GetType() == csi.PluginCapability_Service_CONTROLLER_SERVICE
	}
	if !hasController {
		t.Errorf("the controller does not advertise CONTROLLER_SERVICE: %v", pcaps)
	}
	if _, err := csi.NewControllerClient(conn).ControllerGetCapabilities(ctx, &csi.ControllerGetCapabilitiesRequest{}); err != nil {
		t.Fatal(err)
	}
	// Its liveness and readiness probes: exec `tridentctl -s 127.0.0.1:8000
	// version` in the container; the operator's wait adds -o json.
	eventually(t, "controller exec probe", 30*time.Second, func() (bool, string) {
		code, out := execIn(t, c.netns, "tridentctl", "-s", "127.0.0.1:8000", "version")
		return code == 0, out
	})
	code, out := execIn(t, c.netns, "tridentctl", "-s", "127.0.0.1:8000", "version", "-o", "json")
	var versions struct{ Server, Client struct{ Version string } }
	if err := json.Unmarshal([]byte(out), &versions); code != 0 || err != nil || !strings.HasPrefix(versions.Server.Version, tridentVersion+"+") {
		t.Fatalf("tridentctl version -o json: exit %d, %v:\n%s", code, err, out)
	}
	eventually(t, "TridentBackendConfig bound", 60*time.Second, func() (bool, string) {
		st, _ := c.api.get("tridentbackendconfigs", "backend-san")["status"].(map[string]any)
		return st["phase"] == "Bound" && st["lastOperationStatus"] == "Success", fmt.Sprint(st)
	})
	return ctrl, conn
}

// startReachableNode starts the node DaemonSet pod on worker-1, which
// reaches the controller: it registers with kubelet through the host root
// mount, and its node info reaches the controller over mutual TLS and is
// kept as a TridentNode. It returns the node's client of the controller's
// node API.
func (c *cluster) startReachableNode(ctx context.Context, t *testing.T, v string) (*nodeHost, *container, *http.Client) {
	w1 := c.newNodeHost(t, "worker-1")
	k1 := startKubelet(t, w1)
	n1 := c.startNode(t, v, w1, c.netns)
	dial(t, n1.proc, w1.path("/var/lib/kubelet/plugins/csi.trident.netapp.io/csi.sock"))
	// The operator's trident-main container does not mount plugins_registry.
	ep := k1.registered(t)
	if want := w1.path("/var/lib/kubelet/plugins/csi.trident.netapp.io/csi-node.sock"); ep != want {
		t.Errorf("kubelet endpoint %s, want %s", ep, want)
	}
	ni, err := csi.NewNodeClient(dial(t, n1.proc, ep)).NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	if err != nil || ni.NodeId != "worker-1" {
		t.Fatalf("NodeGetInfo = %v, %v", ni, err)
	}
	// No --node-topology in the operator's DaemonSet: the Node's
	// topology.kubernetes.io labels, read with Trident's node
	// ServiceAccount, as Trident's node reports them.
	if seg := ni.GetAccessibleTopology().GetSegments(); len(seg) != 1 || seg["topology.kubernetes.io/zone"] != "zone-worker-1" {
		t.Errorf("NodeGetInfo topology %v, want the Node's label topology.kubernetes.io/zone=zone-worker-1", seg)
	}
	if !strings.Contains(n1.logs(), `host-root=/host`) {
		t.Error("node did not find the host root at /host")
	}
	// docs/operator.md's check, run in the node pod's filesystem.
	st := startContainer(t, containerSpec{Mounts: c.nodeMounts(w1), Argv: []string{"/ontap-csi", "status", "--host-root", "/host", "--json"}})
	<-st.done
	if out := st.logs(); st.cmd.ProcessState.ExitCode() != 0 || !strings.Contains(out, `"phase": "registered"`) {
		t.Errorf("ontap-csi status in the node pod: exit %d:\n%s", st.cmd.ProcessState.ExitCode(), out)
	}
	ctrlAPI := httpsIn(c.netns, c.nodeClientTLS(t))
	eventually(t, "worker-1 registered with the controller", 60*time.Second, func() (bool, string) {
		code, body := get(t, ctrlAPI, "https://127.0.0.1:8443/trident/v1/node/worker-1")
		return code == http.StatusOK && strings.Contains(body, w1.iqn), body
	})
	if tn := c.api.get("tridentnodes", "worker-1"); tn == nil || tn["iqn"] != w1.iqn || tn["name"] != "worker-1" {
		t.Fatalf("TridentNode worker-1 = %v", tn)
	}
	if v == "26.06" {
		prober := httpsIn(c.netns, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // kubelet's prober
		for _, path := range []string{"/liveness", "/readiness"} {
			eventually(t, "node probe "+path, 30*time.Second, func() (bool, string) {
				code, body := get(t, prober, "https://127.0.0.1:17546"+path)
				return code == http.StatusOK, fmt.Sprint(code, body)
			})
		}
	}
	return w1, n1, ctrlAPI
}

// startUnreachableNode starts the node DaemonSet pod on worker-2, which
// cannot reach the controller: it serves CSI, registers with kubelet, stays
// registered and ready, and retries the controller.
func (c *cluster) startUnreachableNode(ctx context.Context, t *testing.T, v string) (*nodeHost, *container) {
	w2 := c.newNodeHost(t, "worker-2")
	k2 := startKubelet(t, w2)
	n2 := c.startNode(t, v, w2, c.isolate)
	ep2 := k2.registered(t)
	eventually(t, "worker-2 retries the controller", 60*time.Second, func() (bool, string) {
		return strings.Count(n2.logs(), "reporting node info to the controller failed") >= 2, ""
	})
	// Its topology does not wait for the controller: it is the Node's.
	if ni, err := csi.NewNodeClient(dial(t, n2.proc, ep2)).NodeGetInfo(ctx, &csi.NodeGetInfoRequest{}); err != nil || ni.NodeId != "worker-2" ||
		ni.GetAccessibleTopology().GetSegments()["topology.kubernetes.io/zone"] != "zone-worker-2" {
		t.Fatalf("worker-2 NodeGetInfo = %v, %v", ni, err)
	}
	assertRegistered(t, w2)
	if v == "26.06" {
		prober := httpsIn(c.isolate, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // kubelet's prober
		if code, body := get(t, prober, "https://127.0.0.1:17546/readiness"); code != http.StatusOK {
			t.Errorf("worker-2 /readiness = %d %s; a node without its controller is still ready", code, body)
		}
	}
	if c.api.get("tridentnodes", "worker-2") != nil {
		t.Error("worker-2 has a TridentNode although it never reached the controller")
	}
	return w2, n2
}

// checkControllers checks that the controllers asked the API for nothing
// beyond their grants and logged no panic and no password.
func (c *cluster) checkControllers(t *testing.T, v string, ctrls ...*container) {
	for _, call := range c.api.used("controller") {
		if !slices.Contains(controllerRBAC, call) {
			t.Errorf("the controller called %q, which its RBAC does not grant", call)
		}
	}
	for _, p := range ctrls {
		logs := p.logs()
		checkIgnoredFlags(t, logs, tridentIgnoredOf(t, v+" controller Deployment"))
		if strings.Contains(logs, "panic") || strings.Contains(logs, ontapPassword) {
			t.Errorf("controller log has a panic or the ONTAP password:\n%s", logs)
		}
	}
}

// stopNodesRegistered sends SIGTERM to the node plugins: they exit cleanly
// and stay registered (no successor: they keep E for the next pod,
// docs/design/registration.md §5).
func stopNodesRegistered(t *testing.T, nodes []*container, hosts []*nodeHost) {
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = n.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-n.done:
			case <-time.After(60 * time.Second):
			}
		}()
	}
	wg.Wait()
	for _, n := range nodes {
		if n.cmd.ProcessState == nil || n.cmd.ProcessState.ExitCode() != 0 {
			t.Errorf("node plugin did not exit 0 after SIGTERM: %v", n.cmd.ProcessState)
		}
	}
	for _, h := range hosts {
		entries, _ := os.ReadDir(h.path("/var/lib/kubelet/plugins_registry"))
		live := 0
		for _, e := range entries {
			if !strings.HasPrefix(e.Name(), ".") {
				live++
			}
		}
		if live != 1 {
			t.Errorf("%s: %d registration sockets after SIGTERM, want 1 (kept for the next pod)", h.name, live)
		}
	}
}

// assertRegistered checks through `ontap-csi status` that the node's lease
// says kubelet accepted the registration and the holder is alive.
func assertRegistered(t *testing.T, h *nodeHost) {
	t.Helper()
	out, code := runToExit(t, "status", "--kubelet-dir", h.path("/var/lib/kubelet"),
		"--plugin-dir", h.path("/var/lib/kubelet/plugins/csi.trident.netapp.io"),
		"--registration-dir", h.path("/var/lib/kubelet/plugins_registry"), "--json")
	var st struct {
		Lease *struct {
			Phase string `json:"phase"`
		} `json:"lease"`
		HolderAlive bool `json:"holderAlive"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Lease == nil || st.Lease.Phase != "registered" || !st.HolderAlive {
		t.Fatalf("%s: not registered with a live holder (exit %d):\n%s", h.name, code, out)
	}
}

// igroupInitiators lists the initiators of every igroup on the simulator.
// publishToWorker1 creates an ext4 volume on the san backend and publishes
// it to worker-1, whose IQN must then be in its igroup on ONTAP.
func (c *cluster) publishToWorker1(ctx context.Context, t *testing.T, cc csi.ControllerClient, name string, w1 *nodeHost) (*csi.Volume, *csi.VolumeCapability) {
	t.Helper()
	capability := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "ext4"}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	vol, err := cc.CreateVolume(ctx, &csi.CreateVolumeRequest{
		Name: name, VolumeCapabilities: []*csi.VolumeCapability{capability},
		CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30},
	})
	if err != nil {
		t.Fatalf("CreateVolume: %v", err)
	}
	pub, err := cc.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{
		VolumeId: vol.Volume.VolumeId, NodeId: "worker-1", VolumeCapability: capability,
	})
	if err != nil || pub.PublishContext["iscsiTargetIqn"] == "" {
		t.Fatalf("ControllerPublishVolume to worker-1 = %v, %v", pub, err)
	}
	if initiators := c.igroupInitiators(t); !slices.Contains(initiators, w1.iqn) {
		t.Errorf("igroup initiators on ONTAP = %v, want worker-1's %s", initiators, w1.iqn)
	}
	return vol.Volume, capability
}

func (c *cluster) igroupInitiators(t *testing.T) []string {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/api/protocols/san/igroups?fields=initiators", nil)
	req.SetBasicAuth("admin", ontapPassword)
	rec := httptest.NewRecorder()
	c.sim.Handler().ServeHTTP(rec, req)
	var list struct {
		Records []struct {
			Initiators []struct{ Name string } `json:"initiators"`
		} `json:"records"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil {
		t.Fatalf("igroups: %v: %s", err, rec.Body.String())
	}
	var out []string
	for _, r := range list.Records {
		for _, i := range r.Initiators {
			out = append(out, i.Name)
		}
	}
	return out
}
