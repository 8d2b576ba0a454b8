// Package tridentrest serves the parts of Trident's controller REST API
// that Trident's own objects call: the node endpoints under
// /trident/v1/node, which node plugins use to register (over mutual TLS,
// the HTTPS server of --https_rest), and GET /trident/v1/version, which
// `tridentctl ... version` reads for the controller Deployment's exec
// liveness and readiness probes and for the operator's wait (the plain HTTP
// server of --rest on --address:--port). Nothing else of Trident's API is
// served.
package tridentrest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/ontap-csi/ontap-csi/controller/tridentnodes"
	"github.com/ontap-csi/ontap-csi/nodeinfo"
)

// BaseURL is Trident's API root.
const BaseURL = "/trident/v1"

// maxBody bounds a request body; a node record is well under 1 KiB.
const maxBody = 1 << 20

var requestsTotal = promauto.NewCounterVec(prometheus.CounterOpts{
	Namespace: "ontap_csi",
	Subsystem: "trident_rest",
	Name:      "requests_total",
	Help:      "Requests to Trident's REST API by route and HTTP status code.",
}, []string{"route", "code"})

// TopologyFunc returns the topology labels of a Kubernetes node.
type TopologyFunc func(ctx context.Context, node string) (map[string]string, error)

// NodeTopology reads a node's topology.kubernetes.io/* labels, which is
// what Trident's controller answers a registering node with.
func NodeTopology(client dynamic.Interface) TopologyFunc {
	return func(ctx context.Context, node string) (map[string]string, error) {
		n, err := client.Resource(nodeinfo.NodesGVR).Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return nodeinfo.TopologyLabels(n.GetLabels()), nil
	}
}

// ControllerAPI is what the controller serves node plugins (--https_rest):
// /trident/v1/node, where PUT registers a node, GET reads one or lists
// them and DELETE forgets one, and /trident/v1/version. Bodies and answers
// are Trident's.
func ControllerAPI(nodes *tridentnodes.Store, topology TopologyFunc, version string) http.Handler {
	h := &nodeAPI{nodes: nodes, topology: topology}
	mux := http.NewServeMux()
	mux.HandleFunc("PUT "+BaseURL+"/node/{name}", h.put)
	mux.HandleFunc("GET "+BaseURL+"/node/{name}", h.get)
	mux.HandleFunc("DELETE "+BaseURL+"/node/{name}", h.delete)
	mux.HandleFunc("GET "+BaseURL+"/node", h.list)
	mux.HandleFunc("GET "+BaseURL+"/version", versionHandler(version))
	return mux
}

type nodeAPI struct {
	nodes    *tridentnodes.Store
	topology TopologyFunc
}

// Answers, with Trident's JSON names (frontend/rest); PUT's is
// nodeinfo.AddNodeResponse, which the node plugin reads.
type (
	getNodeResponse struct {
		Node  *nodeinfo.TridentNode `json:"node"`
		Error string                `json:"error,omitempty"`
	}
	listNodesResponse struct {
		Nodes []string `json:"nodes"`
		Error string   `json:"error,omitempty"`
	}
	errorResponse struct {
		Error string `json:"error,omitempty"`
	}
)

func (h *nodeAPI) put(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	log := logrus.WithFields(logrus.Fields{"node": name, "remote": r.RemoteAddr})
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		reply(w, "node.put", http.StatusBadRequest, nodeinfo.AddNodeResponse{Error: fmt.Sprintf("reading the body: %v", err)})
		return
	}
	var n nodeinfo.TridentNode
	if err := json.Unmarshal(body, &n); err != nil {
		reply(w, "node.put", http.StatusBadRequest, nodeinfo.AddNodeResponse{Error: fmt.Sprintf("invalid JSON: %v", err)})
		return
	}
	if n.Name == "" {
		n.Name = name
	}
	if n.Name != name {
		reply(w, "node.put", http.StatusBadRequest, nodeinfo.AddNodeResponse{Error: fmt.Sprintf("the body names node %q, the URL %q", n.Name, name)})
		return
	}
	labels := map[string]string{}
	if h.topology != nil {
		if labels, err = h.topology(r.Context(), name); err != nil {
			// The node plugin retries; registering it without its
			// topology would hand a Trident node plugin wrong labels.
			log.WithError(err).Warn("cannot read the node's topology labels; the node will retry")
			reply(w, "node.put", http.StatusServiceUnavailable, nodeinfo.AddNodeResponse{Error: fmt.Sprintf("reading node %s: %v", name, err)})
			return
		}
	}
	stored, err := h.nodes.Put(r.Context(), n)
	if err != nil {
		log.WithError(err).Warn("cannot store the node record")
		reply(w, "node.put", http.StatusServiceUnavailable, nodeinfo.AddNodeResponse{Name: name, Error: err.Error()})
		return
	}
	log.WithFields(logrus.Fields{"iqn": stored.IQN, "ips": stored.IPs, "topology": labels}).Info("node registered")
	reply(w, "node.put", http.StatusCreated, nodeinfo.AddNodeResponse{Name: name, TopologyLabels: labels})
}

func (h *nodeAPI) get(w http.ResponseWriter, r *http.Request) {
	n, err := h.nodes.Get(r.Context(), r.PathValue("name"))
	if err != nil {
		reply(w, "node.get", statusOf(err), getNodeResponse{Error: err.Error()})
		return
	}
	reply(w, "node.get", http.StatusOK, getNodeResponse{Node: n})
}

func (h *nodeAPI) list(w http.ResponseWriter, r *http.Request) {
	nodes, err := h.nodes.List(r.Context())
	if err != nil {
		reply(w, "node.list", statusOf(err), listNodesResponse{Nodes: []string{}, Error: err.Error()})
		return
	}
	names := make([]string, 0, len(nodes))
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	reply(w, "node.list", http.StatusOK, listNodesResponse{Nodes: names})
}

func (h *nodeAPI) delete(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := h.nodes.Delete(r.Context(), name); err != nil {
		reply(w, "node.delete", statusOf(err), errorResponse{Error: err.Error()})
		return
	}
	logrus.WithFields(logrus.Fields{"node": name, "remote": r.RemoteAddr}).Info("node record deleted")
	reply(w, "node.delete", http.StatusOK, errorResponse{})
}

// VersionResponse is Trident's answer to GET /trident/v1/version.
type VersionResponse struct {
	Version   string `json:"version"`
	GoVersion string `json:"goVersion"`
	Error     string `json:"error,omitempty"`
}

// VersionAPI serves only GET /trident/v1/version: all that `tridentctl
// version` (the Deployment's exec probes, the operator's wait) asks of the
// plain HTTP REST server (--rest).
func VersionAPI(version string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+BaseURL+"/version", versionHandler(version))
	return mux
}

func versionHandler(version string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		reply(w, "version", http.StatusOK, VersionResponse{Version: version, GoVersion: runtime.Version()})
	}
}

func statusOf(err error) int {
	if errors.Is(err, tridentnodes.ErrNotFound) {
		return http.StatusNotFound
	}
	return http.StatusServiceUnavailable
}

func reply(w http.ResponseWriter, route string, code int, body any) {
	requestsTotal.WithLabelValues(route, fmt.Sprint(code)).Inc()
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}
