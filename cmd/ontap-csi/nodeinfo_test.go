package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/client-go/rest"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/controller"
	"github.com/ontap-csi/ontap-csi/controller/kubenodes"
	"github.com/ontap-csi/ontap-csi/node/kubenode"
	"github.com/ontap-csi/ontap-csi/nodeinfo"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
	"github.com/ontap-csi/ontap-csi/test/tridentcerts"
)

// nodesAPI serves GET and merge-patch PATCH of /api/v1/nodes/<name>, as the
// API server does for the annotation, and records "who verb" per call.
type nodesAPI struct {
	mu    sync.Mutex
	nodes map[string]map[string]any
	calls []string
}

func (a *nodesAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	who := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if r.URL.Path == "/version" { // the registration's API check
		writeJSON(w, http.StatusOK, map[string]any{"major": "1", "minor": "34", "gitVersion": "v1.34.0"})
		return
	}
	name, ok := strings.CutPrefix(r.URL.Path, "/api/v1/nodes/")
	if !ok || name == "" || strings.Contains(name, "/") {
		// The registration watchdog's CSINode watch: not served here.
		apiError(w, http.StatusNotFound, "NotFound", "the server could not find the requested resource")
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, who+" "+map[string]string{http.MethodGet: "get", http.MethodPatch: "patch"}[r.Method])
	obj := a.nodes[name]
	if obj == nil {
		apiError(w, http.StatusNotFound, "NotFound", `nodes "`+name+`" not found`)
		return
	}
	switch r.Method {
	case http.MethodGet:
		writeJSON(w, http.StatusOK, obj)
	case http.MethodPatch:
		if ct := r.Header.Get("Content-Type"); ct != "application/merge-patch+json" {
			apiError(w, http.StatusUnsupportedMediaType, "UnsupportedMediaType", "content type "+ct)
			return
		}
		data, _ := io.ReadAll(r.Body)
		var patch struct {
			Metadata struct {
				Annotations map[string]*string `json:"annotations"`
			} `json:"metadata"`
		}
		var whole map[string]any
		if json.Unmarshal(data, &patch) != nil || json.Unmarshal(data, &whole) != nil || len(whole) != 1 {
			apiError(w, http.StatusBadRequest, "BadRequest", "the test API takes metadata.annotations patches only: "+string(data))
			return
		}
		meta := obj["metadata"].(map[string]any)
		ann, _ := meta["annotations"].(map[string]any)
		if ann == nil {
			ann = map[string]any{}
		}
		for k, v := range patch.Metadata.Annotations {
			if v == nil {
				delete(ann, k)
			} else {
				ann[k] = *v
			}
		}
		meta["annotations"] = ann
		writeJSON(w, http.StatusOK, obj)
	default:
		apiError(w, http.StatusMethodNotAllowed, "MethodNotAllowed", r.Method)
	}
}

func (a *nodesAPI) takeCalls() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.calls
	a.calls = nil
	return out
}

// TestNodeInfoThroughTheAPI runs both sides over HTTP with the clients the
// binary builds: the node plugin annotates its Node, the controller reads
// it, each using only the verbs deploy/ grants it (node: get and patch
// nodes; controller: get nodes).
func TestNodeInfoThroughTheAPI(t *testing.T) {
	api := &nodesAPI{nodes: map[string]map[string]any{
		"worker-1": {"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{
			"name": "worker-1", "annotations": map[string]any{"volumes.kubernetes.io/controller-managed-attach-detach": "true"},
		}},
		"worker-2": {"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": "worker-2"}},
	}}
	srv := httptest.NewServer(api)
	defer srv.Close()
	client := func(token string) *rest.Config { return &rest.Config{Host: srv.URL, BearerToken: token} }
	nodeKube, err := newKubeAccess(client("node"))
	if err != nil {
		t.Fatal(err)
	}
	ctrlKube, err := newKubeAccess(client("controller"))
	if err != nil {
		t.Fatal(err)
	}
	nodeClient, ctrlClient := nodeKube.client, ctrlKube.client
	ctx := context.Background()
	reporter := kubenode.New(nodeClient)
	registry := kubenodes.New(ctrlClient, -1) // no cache: every lookup reads

	// Before the node plugin reported: a clear not-found.
	_, err = registry.Node(ctx, "worker-1")
	if !errors.Is(err, controller.ErrNodeNotFound) || !strings.Contains(err.Error(), "node plugin has not reported") {
		t.Fatalf("before reporting: %v", err)
	}

	info := backends.Node{Name: "worker-1", IQN: "iqn.1993-08.org.debian:01:w1", IPs: []string{"10.0.0.1", "fd00::1"}}
	if err := reporter.ReportNode(ctx, info); err != nil {
		t.Fatal(err)
	}
	got, err := registry.Node(ctx, "worker-1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != info.Name || got.IQN != info.IQN || !slices.Equal(got.IPs, info.IPs) {
		t.Fatalf("controller read %+v, node reported %+v", got, info)
	}
	if ann := api.nodes["worker-1"]["metadata"].(map[string]any)["annotations"].(map[string]any); ann["volumes.kubernetes.io/controller-managed-attach-detach"] != "true" {
		t.Errorf("kubelet's annotation lost: %v", ann)
	}
	if calls := api.takeCalls(); !slices.Equal(calls, []string{"controller get", "node get", "node patch", "controller get"}) {
		t.Errorf("calls = %v", calls)
	}

	// A plugin restart with the same info writes nothing; new info is seen.
	if err := reporter.ReportNode(ctx, info); err != nil {
		t.Fatal(err)
	}
	info.IPs = []string{"10.0.0.11"}
	if err := reporter.ReportNode(ctx, info); err != nil {
		t.Fatal(err)
	}
	if got, err = registry.Node(ctx, "worker-1"); err != nil || !slices.Equal(got.IPs, info.IPs) {
		t.Fatalf("after the change: %+v, %v", got, err)
	}
	if calls := api.takeCalls(); !slices.Equal(calls, []string{"node get", "node get", "node patch", "controller get"}) {
		t.Errorf("calls = %v", calls)
	}

	// Another node, not reported; a name that is no Node.
	for _, id := range []string{"worker-2", "worker-9"} {
		if _, err := registry.Node(ctx, id); !errors.Is(err, controller.ErrNodeNotFound) || !strings.Contains(err.Error(), `"`+id+`"`) {
			t.Errorf("%s: %v", id, err)
		}
	}
	if err := reporter.ReportNode(ctx, backends.Node{Name: "worker-9"}); err == nil || !strings.Contains(err.Error(), "--csi_node_name") {
		t.Errorf("reporting for a name that is no Node: %v", err)
	}
}

// annotation returns a Node's node info annotation, "" if none.
func (a *nodesAPI) annotation(name string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	meta, _ := a.nodes[name]["metadata"].(map[string]any)
	ann, _ := meta["annotations"].(map[string]any)
	v, _ := ann[nodeinfo.AnnotationKey].(string)
	return v
}

// TestStandaloneAttach runs the real binary as deploy/kustomize/base (and
// the Helm chart) run it: a controller with --backend-config and no
// --crd_persistence, a node plugin without Trident's certificates, both in
// pods (service account, KUBERNETES_SERVICE_*). The node info goes through
// the Node annotation, so ControllerPublishVolume finds the node and puts
// its IQN in the igroup; a node without a node plugin is NotFound.
func TestStandaloneAttach(t *testing.T) {
	c := &cluster{root: shortTempDir(t)}
	api := c.startStandaloneSandbox(t)
	conn := c.startStandaloneController(t)
	w1, n1 := c.startStandaloneNode(t, api, "worker-1")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cc := csi.NewControllerClient(conn)
	vol, capability := c.publishToWorker1(ctx, t, cc, "pvc-standalone", w1)
	igroups, maps := fmt.Sprint(c.sim.IGroups()), fmt.Sprint(c.sim.LUNMaps())
	for _, id := range []string{"worker-2", "worker-9"} { // no node plugin; no Node
		_, err := cc.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{
			VolumeId: vol.VolumeId, NodeId: id, VolumeCapability: capability,
		})
		if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), id) {
			t.Errorf("publish to %s: %v, want NotFound naming it", id, err)
		}
	}
	// A refused publish is refused before anything changes on the array.
	if got := fmt.Sprint(c.sim.IGroups()); got != igroups {
		t.Errorf("refused publishes changed the igroups:\n%s\nwas\n%s", got, igroups)
	}
	if got := fmt.Sprint(c.sim.LUNMaps()); got != maps {
		t.Errorf("refused publishes changed the LUN maps:\n%s\nwas\n%s", got, maps)
	}
	if _, err := cc.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: vol.VolumeId, NodeId: "worker-1"}); err != nil {
		t.Errorf("ControllerUnpublishVolume: %v", err)
	}

	// Each side used only what deploy/ grants it.
	for _, call := range api.takeCalls() {
		if call != "controller get" && call != "node get" && call != "node patch" {
			t.Errorf("API call %q is not granted", call)
		}
	}
	if !strings.Contains(n1.logs(), "node info reported to the controller") {
		t.Errorf("node log does not confirm the report:\n%s", n1.logs())
	}
}

// inPod is what a pod's containers find: the API server's Service.
var inPod = []string{"KUBERNETES_SERVICE_HOST=127.0.0.1", "KUBERNETES_SERVICE_PORT=6443"}

const saPath = "/var/run/secrets/kubernetes.io/serviceaccount"

// startStandaloneSandbox starts a network namespace serving the Kubernetes
// API (Nodes worker-1 and worker-2) on 127.0.0.1:6443 and the ONTAP
// simulator on 127.0.0.1:9443, over TLS, and the service accounts of the
// controller and the node plugin.
func (c *cluster) startStandaloneSandbox(t *testing.T) *nodesAPI {
	var err error
	if c.certs, err = tridentcerts.Write(filepath.Join(c.root, "certs")); err != nil {
		t.Fatal(err)
	}
	// Tokens are the callers' names in the API's record.
	c.saCtrl, c.saNode = c.serviceAccount(t, "sa-ctrl", "controller"), c.serviceAccount(t, "sa-node", "node")
	api := &nodesAPI{nodes: map[string]map[string]any{}}
	for _, name := range []string{"worker-1", "worker-2"} {
		api.nodes[name] = map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": name}}
	}
	c.netns = startSandbox(t)
	cert, err := tls.LoadX509KeyPair(c.certs.Path(tridentcerts.ServerCert), c.certs.Path(tridentcerts.ServerKey))
	if err != nil {
		t.Fatal(err)
	}
	serveTLS := func(addr string, h http.Handler) {
		l, err := listenIn(c.netns, addr)
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{cert}})) }()
		t.Cleanup(func() { srv.Close() })
	}
	serveTLS("127.0.0.1:6443", api)
	if c.sim, err = ontapsim.New(ontapsim.Config{Password: ontapPassword}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.sim.Close() })
	serveTLS("127.0.0.1:9443", c.sim.Handler())
	return api
}

// startStandaloneController runs deploy/kustomize/controller/deployment.yaml's
// ontap-csi container, its backend from the ontap-csi-backends Secret (as
// deploy/examples/backend-ontap-san.yaml), and connects to its CSI socket.
func (c *cluster) startStandaloneController(t *testing.T) *grpc.ClientConn {
	ca, err := os.ReadFile(c.certs.Path(tridentcerts.CACert))
	if err != nil {
		t.Fatal(err)
	}
	backends := filepath.Join(c.root, "backends")
	backend, _ := json.Marshal(map[string]any{
		"version": 1, "storageDriverName": "ontap-san", "backendName": "ontap-san",
		"managementLIF": "127.0.0.1:9443", "svm": "svm0", "username": "admin", "password": ontapPassword,
		"trustedCACertificate": string(ca),
	})
	ctrlPlugin := filepath.Join(c.root, "ctrl-plugin")
	for _, dir := range []string{backends, ctrlPlugin} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(backends, "backend.json"), backend, 0o600); err != nil {
		t.Fatal(err)
	}
	ctrl := startContainer(t, containerSpec{
		NetNS: c.netns,
		Mounts: []mountSpec{
			{Source: ctrlPlugin, Target: "/plugin"},
			{Source: backends, Target: "/etc/ontap-csi/backends", ReadOnly: true},
			{Source: c.saCtrl, Target: saPath, ReadOnly: true},
		},
		Argv: []string{"/ontap-csi", "--csi_role=controller", "--csi_endpoint=unix:///plugin/csi.sock",
			"--backend-config=/etc/ontap-csi/backends/backend.json", "--metrics-address=:9808", "--log_format=text", "--log_level=info"},
		Env: inPod,
	})
	return dial(t, ctrl.proc, filepath.Join(ctrlPlugin, "csi.sock"))
}

// startStandaloneNode runs deploy/kustomize/node/daemonset.yaml's container
// on a node host (no /certs) and waits until kubelet registered it and its
// node info is on its Node.
func (c *cluster) startStandaloneNode(t *testing.T, api *nodesAPI, name string) (*nodeHost, *container) {
	h := c.newNodeHost(t, name)
	k := startKubelet(t, h)
	const kubelet = "/var/lib/kubelet"
	n := startContainer(t, containerSpec{
		NetNS: c.netns,
		Mounts: []mountSpec{
			{Source: h.path(kubelet + "/plugins/csi.trident.netapp.io"), Target: "/plugin"},
			{Source: h.path(kubelet + "/plugins_registry"), Target: kubelet + "/plugins_registry"},
			{Source: h.path(kubelet + "/plugins"), Target: kubelet + "/plugins"},
			{Source: h.path(kubelet + "/pods"), Target: kubelet + "/pods"},
			{Source: h.root, Target: "/host"},
			{Source: h.path("/var/lib/trident/tracking"), Target: "/var/lib/trident/tracking"},
			{Source: c.saNode, Target: saPath, ReadOnly: true},
		},
		Argv: []string{"/ontap-csi", "--csi_role=node", "--csi_endpoint=unix:///plugin/csi.sock", "--csi_node_name=" + name,
			"--kubelet-dir=" + kubelet, "--host-root=/host", "--handover-grace=20s", "--metrics-address=:9809",
			"--log_format=text", "--log_level=info"},
		Env: append([]string{"POD_NAME=ontap-csi-node-" + name, "POD_UID=uid-" + name}, inPod...),
	})
	k.registered(t)
	eventually(t, name+"'s node info on its Node", 60*time.Second, func() (bool, string) {
		return strings.Contains(api.annotation(name), h.iqn), n.logs()
	})
	return h, n
}
