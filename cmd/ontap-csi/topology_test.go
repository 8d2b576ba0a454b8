package main

import (
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/proto"
	"k8s.io/client-go/rest"
)

// nodeLabelsAPI serves GET /api/v1/nodes/worker-1 with labels, or fails
// every GET with status, and counts the GETs.
type nodeLabelsAPI struct {
	labels map[string]any
	status int // 0: serve the Node; -1: hang until the client gives up

	mu   sync.Mutex
	gets int
}

func (a *nodeLabelsAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutPrefix(r.URL.Path, "/api/v1/nodes/")
	if !ok || r.Method != http.MethodGet {
		apiError(w, http.StatusNotFound, "NotFound", "the test API serves GET of nodes only")
		return
	}
	a.mu.Lock()
	a.gets++
	a.mu.Unlock()
	switch {
	case a.status < 0:
		<-r.Context().Done()
	case a.status == http.StatusForbidden:
		apiError(w, a.status, "Forbidden", `nodes "`+name+`" is forbidden: User "system:serviceaccount:trident:trident-node-linux" cannot get resource "nodes"`)
	case a.status != 0:
		apiError(w, a.status, "ServiceUnavailable", "the server is currently unable to handle the request")
	case name != "worker-1":
		apiError(w, http.StatusNotFound, "NotFound", `nodes "`+name+`" not found`)
	default:
		writeJSON(w, http.StatusOK, map[string]any{"apiVersion": "v1", "kind": "Node",
			"metadata": map[string]any{"name": name, "labels": a.labels}})
	}
}

func (a *nodeLabelsAPI) getCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.gets
}

// TestNodeTopologyAtStart: what the node role's NodeGetInfo reports, from
// the flag or its Node's labels through the client the binary builds, and
// that two starts on the same labels report the same node info (K5).
func TestNodeTopologyAtStart(t *testing.T) {
	defer func(b time.Duration) { topologyBound = b }(topologyBound)
	topologyBound = 1500 * time.Millisecond // tries at 0, 1 s; 3 s is past it

	zoneRegion := map[string]any{"topology.kubernetes.io/zone": "z1", "topology.kubernetes.io/region": "r1",
		"kubernetes.io/hostname": "worker-1", "failure-domain.beta.kubernetes.io/zone": "z1"}
	for _, tc := range []struct {
		name     string
		flag     string // --node-topology
		inPod    bool   // the pod's API config exists
		node     string // --csi_node_name; "" = worker-1
		labels   map[string]any
		status   int               // the API's answer to every GET; 0 = the Node
		want     map[string]string // NodeGetInfo's segments; nil = no topology
		wantErr  string
		wantGets int
	}{
		{name: "the Node's labels with Trident's prefix", inPod: true, labels: zoneRegion,
			want: map[string]string{"topology.kubernetes.io/zone": "z1", "topology.kubernetes.io/region": "r1"}, wantGets: 1},
		{name: "no topology labels: no topology", inPod: true, labels: map[string]any{"kubernetes.io/hostname": "worker-1"}, wantGets: 1},
		{name: "--node-topology wins; the API is not asked", flag: "topology.kubernetes.io/zone=flag-zone", inPod: true, labels: zoneRegion,
			want: map[string]string{"topology.kubernetes.io/zone": "flag-zone"}},
		{name: "outside a pod: no topology", labels: zoneRegion},
		{name: "RBAC forbids get nodes: no topology, every start alike", inPod: true, labels: zoneRegion, status: http.StatusForbidden, wantGets: 1},
		{name: "the Node cannot be read: no start", inPod: true, labels: zoneRegion, status: http.StatusServiceUnavailable,
			wantErr: "cannot be read; not registering with kubelet", wantGets: 2},
		{name: "the API server hangs: no start, within the bound", inPod: true, labels: zoneRegion, status: -1,
			wantErr: "cannot be read; not registering with kubelet", wantGets: 1},
		{name: "no such Node: no start", inPod: true, node: "worker-9", labels: zoneRegion,
			wantErr: `Node "worker-9" does not exist`, wantGets: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := &nodeLabelsAPI{labels: tc.labels, status: tc.status}
			srv := httptest.NewServer(api)
			defer srv.Close()
			var kube *kubeAccess // nil: not in a pod
			if tc.inPod {
				var err error
				if kube, err = newKubeAccess(&rest.Config{Host: srv.URL, BearerToken: "node"}); err != nil {
					t.Fatal(err)
				}
			}
			node := tc.node
			if node == "" {
				node = "worker-1"
			}
			// Two starts of the node role on the same node and labels.
			var infos []*csi.NodeGetInfoResponse
			for range 2 {
				dir := t.TempDir()
				args := []string{"--csi_role=node", "--csi_endpoint=unix://" + filepath.Join(dir, "csi.sock"),
					"--csi_node_name=" + node, "--kubelet-dir=" + dir, "--tracking-dir=" + filepath.Join(dir, "tracking"), "--host-root="}
				if tc.flag != "" {
					args = append(args, "--node-topology="+tc.flag)
				}
				o, _, err := parseOptions(args)
				if err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				topo, err := nodeTopology(context.Background(), o, kube)
				if tc.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
						t.Fatalf("nodeTopology = %v, %v; want an error with %q", topo, err, tc.wantErr)
					}
					if took := time.Since(start); took > topologyBound+time.Second {
						t.Errorf("gave up after %s; the bound is %s", took, topologyBound)
					}
					break
				}
				if err != nil || !maps.Equal(topo, tc.want) {
					t.Fatalf("nodeTopology = %v, %v; want %v", topo, err, tc.want)
				}
				o.topology = topo // as serve does
				svc, err := newNode(o, nil)
				if err != nil {
					t.Fatal(err)
				}
				info, err := svc.NodeGetInfo(context.Background(), &csi.NodeGetInfoRequest{})
				if err != nil {
					t.Fatal(err)
				}
				if got := info.GetAccessibleTopology().GetSegments(); !maps.Equal(got, tc.want) || (tc.want == nil) != (info.AccessibleTopology == nil) {
					t.Fatalf("NodeGetInfo topology %v, want %v", info.AccessibleTopology, tc.want)
				}
				infos = append(infos, info)
			}
			if len(infos) == 2 && !proto.Equal(infos[0], infos[1]) {
				t.Errorf("two starts on the same labels: %v and %v", infos[0], infos[1])
			}
			if tc.wantErr == "" {
				tc.wantGets *= 2 // per start
			}
			if got := api.getCount(); got != tc.wantGets {
				t.Errorf("%d GETs of the Node, want %d", got, tc.wantGets)
			}
		})
	}
}
