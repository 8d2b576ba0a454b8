package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/ontap-csi/ontap-csi/controller/backendconfigs"
	"github.com/ontap-csi/ontap-csi/controller/inventory"
	"github.com/ontap-csi/ontap-csi/controller/tridentnodes"
	"github.com/ontap-csi/ontap-csi/controller/tridentrest"
	"github.com/ontap-csi/ontap-csi/node"
	"github.com/ontap-csi/ontap-csi/node/controllerapi"
	"github.com/ontap-csi/ontap-csi/node/probes"
	"github.com/ontap-csi/ontap-csi/server"
)

// tridentVersion is the Trident release the image stands in for, set at
// build time (-X main.tridentVersion=...). trident-operator refuses an image
// whose `tridentctl version --client` is not exactly its own release.
var tridentVersion = "26.06.0"

// reportedVersion is what tridentctl and GET /trident/v1/version report:
// the Trident release, with ours as semver build metadata, which Trident's
// version parsing accepts and ignores when it compares releases.
func reportedVersion() string {
	meta := strings.Trim(dots.ReplaceAllString(notMeta.ReplaceAllString(server.Version, "-"), "."), ".")
	if meta == "" {
		return tridentVersion + "+ontap-csi"
	}
	return tridentVersion + "+ontap-csi." + meta
}

// Semver build metadata is dot-separated [0-9A-Za-z-] identifiers.
var (
	notMeta = regexp.MustCompile(`[^0-9A-Za-z.-]+`)
	dots    = regexp.MustCompile(`\.{2,}`)
)

// Trident's certificate files: the trident-csi Secret mounted at /certs.
const certsDir = "/certs/"

// tridentAPIOptions are Trident's flags for its REST API, its Kubernetes
// access and its persistence, as far as ontap-csi implements them.
type tridentAPIOptions struct {
	k8sPod         bool
	k8sAPIServer   string
	k8sQPS         float64
	k8sBurst       int
	crdPersistence bool

	rest          bool
	address, port string

	httpsREST                     bool
	httpsAddress, httpsPort       string
	caCert, serverCert, serverKey string
	clientCert, clientKey         string
}

func (t *tridentAPIOptions) register(fs *flag.FlagSet) {
	fs.BoolVar(&t.k8sPod, "k8s_pod", false, "running in a pod: reach the Kubernetes API with the pod's service account")
	fs.StringVar(&t.k8sAPIServer, "k8s_api_server", "", "Kubernetes API server URL, without credentials (e.g. kubectl proxy); instead of --k8s_pod")
	fs.Float64Var(&t.k8sQPS, "k8s_api_qps", 100, "Kubernetes API queries per second")
	fs.IntVar(&t.k8sBurst, "k8s_api_burst", 200, "Kubernetes API burst")
	fs.BoolVar(&t.crdPersistence, "crd_persistence", false, "controller: node records are TridentNode resources and backends come from TridentBackendConfig resources too (needs the Kubernetes API)")
	fs.BoolVar(&t.rest, "rest", true, "controller: serve GET /trident/v1/version over HTTP on --address:--port (what `tridentctl version` asks)")
	fs.StringVar(&t.address, "address", "127.0.0.1", "address of the HTTP REST server: 127.0.0.1 or ::1, as in Trident (any other means 127.0.0.1)")
	fs.StringVar(&t.port, "port", "8000", "port of the HTTP REST server")
	fs.BoolVar(&t.httpsREST, "https_rest", false, "controller: serve node registration (mutual TLS) on --https_address:--https_port; node: serve the /liveness and /readiness probes there")
	fs.StringVar(&t.httpsAddress, "https_address", "", "address of the HTTPS server (empty: all)")
	fs.StringVar(&t.httpsPort, "https_port", "8443", "port of the HTTPS server")
	fs.StringVar(&t.caCert, "https_ca_cert", certsDir+"caCert", "CA certificate of the controller's HTTPS server and of node client certificates")
	fs.StringVar(&t.serverCert, "https_server_cert", certsDir+"serverCert", "HTTPS server certificate")
	fs.StringVar(&t.serverKey, "https_server_key", certsDir+"serverKey", "HTTPS server private key")
	fs.StringVar(&t.clientCert, "https_client_cert", certsDir+"clientCert", "node: client certificate for registering with the controller")
	fs.StringVar(&t.clientKey, "https_client_key", certsDir+"clientKey", "node: client private key")
}

// validate checks the combination for the role. It runs after the role
// itself was validated.
func (t *tridentAPIOptions) validate(role string) error {
	if role == roleAllInOne && (t.crdPersistence || t.httpsREST) {
		return usagef("--crd_persistence and --https_rest are not supported in the allInOne role")
	}
	if role == roleController {
		if t.httpsREST && !t.crdPersistence {
			return usagef("--https_rest needs --crd_persistence in the controller role: node records are kept as TridentNode resources")
		}
		if t.crdPersistence && !t.k8sPod && t.k8sAPIServer == "" {
			return usagef("--crd_persistence needs the Kubernetes API: --k8s_pod in a pod, or --k8s_api_server")
		}
	}
	if t.httpsREST && t.httpsPort == "" {
		return usagef("--https_rest needs --https_port")
	}
	if t.k8sQPS <= 0 || t.k8sBurst <= 0 {
		return usagef("--k8s_api_qps and --k8s_api_burst must be positive")
	}
	// The HTTP server is unauthenticated: like Trident, bind it to loopback
	// whatever --address says.
	if t.address = strings.Trim(t.address, "[]"); t.address != "::1" {
		t.address = "127.0.0.1"
	}
	return nil
}

// kubeClient connects to the Kubernetes API as Trident does: the pod's
// service account with --k8s_pod, or an unauthenticated --k8s_api_server.
func (t *tridentAPIOptions) kubeClient() (dynamic.Interface, error) {
	var cfg *rest.Config
	if t.k8sAPIServer != "" {
		cfg = &rest.Config{Host: t.k8sAPIServer}
	} else {
		var err error
		if cfg, err = rest.InClusterConfig(); err != nil {
			return nil, fmt.Errorf("Kubernetes API (--k8s_pod): %w", err)
		}
	}
	cfg.QPS, cfg.Burst = float32(t.k8sQPS), t.k8sBurst
	cfg.UserAgent = "ontap-csi/" + server.Version
	return dynamic.NewForConfig(cfg)
}

// podNamespace is the namespace of the controller's Trident resources:
// $POD_NAMESPACE (Trident 26.06's Deployment sets it), else the service
// account's (20.10's does not).
func podNamespace() (string, error) {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns, nil
	}
	data, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	if ns := strings.TrimSpace(string(data)); err == nil && ns != "" {
		return ns, nil
	}
	return "", errors.New("cannot tell the controller's namespace: set POD_NAMESPACE")
}

// tridentController is what --crd_persistence adds to the controller.
type tridentController struct {
	kube dynamic.Interface
	// namespace holds Trident's resources (TridentVolumes among them).
	namespace string
	nodes     *tridentnodes.Store
	backends  *backendconfigs.Watcher
	topology  tridentrest.TopologyFunc
}

// newTridentController connects to the Kubernetes API and starts watching
// TridentBackendConfigs; reserved are the names of --backend-config
// backends. Each configuration's check is reported to inv, and inv lists
// the backends again when one is loaded or removed.
func newTridentController(ctx context.Context, t *tridentAPIOptions, reserved []string, inv *inventory.Inventory) (*tridentController, error) {
	dyn, err := t.kubeClient()
	if err != nil {
		return nil, err
	}
	ns, err := podNamespace()
	if err != nil {
		return nil, err
	}
	w, err := backendconfigs.New(backendconfigs.Config{Dynamic: dyn, Namespace: ns, ReservedNames: reserved,
		Checked: inv.Report, Forgotten: inv.Forget, Served: inv.Changed})
	if err != nil {
		return nil, err
	}
	go w.Run(ctx)
	logrus.WithField("namespace", ns).Info("node records are TridentNode resources; backends come from TridentBackendConfig resources too")
	return &tridentController{kube: dyn, namespace: ns, nodes: tridentnodes.New(dyn, ns), backends: w, topology: tridentrest.NodeTopology(dyn)}, nil
}

// shutdowner is a server that stops gracefully.
type shutdowner interface {
	Shutdown(ctx context.Context) error
}

// serveTridentREST starts the controller's Trident REST servers: node
// registration over mutual TLS (--https_rest) and, over HTTP on loopback
// (--rest), the version, which `tridentctl version` reads for the
// Deployment's exec probes and the operator's wait, and the backends'
// states, which `ontap-csi backends` reads.
func serveTridentREST(t *tridentAPIOptions, tc *tridentController, inv *inventory.Inventory) ([]shutdowner, error) {
	var servers []shutdowner
	if t.httpsREST && tc != nil {
		addr := net.JoinHostPort(t.httpsAddress, t.httpsPort)
		s, err := tridentrest.ListenMutualTLS(addr,
			tridentrest.TLSFiles{CACert: t.caCert, Cert: t.serverCert, Key: t.serverKey},
			tridentrest.ControllerAPI(tc.nodes, tc.topology, reportedVersion()))
		if err != nil {
			return nil, fmt.Errorf("--https_rest: %w", err)
		}
		logrus.WithField("address", s.Addr().String()).Info("serving node registration (Trident's REST API, mutual TLS)")
		servers = append(servers, s)
	}
	if t.rest {
		mux := http.NewServeMux()
		mux.Handle(tridentrest.BaseURL+"/", tridentrest.VersionAPI(reportedVersion()))
		mux.Handle(inventory.Path, inv.Handler())
		s, err := tridentrest.Listen(net.JoinHostPort(t.address, t.port), mux)
		if err != nil {
			// Only `tridentctl version` needs it: a busy port must not
			// keep the controller from serving CSI.
			logrus.WithError(err).Error("cannot serve the HTTP REST server (--rest): `tridentctl version` and probes running it will fail")
			return servers, nil
		}
		logrus.WithField("address", s.Addr().String()).Info("serving GET /trident/v1/version for tridentctl and " + inventory.Path + " for `ontap-csi backends`")
		servers = append(servers, s)
	}
	return servers, nil
}

// nodeReporter reports the node to a Trident-style controller when the
// trident-csi Secret's client certificate is mounted, as Trident's objects
// do. Without it, in a pod (ontap-csi's own install), the node info goes
// into an annotation on the node's Node object, where our controller reads
// it; outside a cluster there is nobody to report to.
func nodeReporter(t *tridentAPIOptions, kube *kubeAccess, topology map[string]string) node.Reporter {
	if _, err := os.Stat(t.clientCert); err != nil {
		if r := nodeAnnotationReporter(kube); r != nil {
			return r
		}
		logrus.WithField("https_client_cert", t.clientCert).Info("no client certificate and not in a pod: node info is not reported to a controller")
		return nil
	}
	url := controllerapi.URLFromEnv(os.Getenv)
	logrus.WithField("controller", url).Info("node info is reported to the controller (PUT /trident/v1/node)")
	return controllerapi.New(controllerapi.Config{
		URL: url, CACert: t.caCert, ClientCert: t.clientCert, ClientKey: t.clientKey, Topology: topology,
	})
}

// serveNodeProbes serves Trident's node probes (--https_rest in the node
// role): ready is kubelet registration, see package probes.
func serveNodeProbes(t *tridentAPIOptions, ready func() bool) (shutdowner, error) {
	s, err := probes.Listen(probes.Config{
		Address:  net.JoinHostPort(t.httpsAddress, t.httpsPort),
		CertFile: t.serverCert, KeyFile: t.serverKey,
		Ready: ready, Shared: true,
	})
	if err != nil {
		return nil, fmt.Errorf("--https_rest: %w", err)
	}
	logrus.WithField("address", s.Addr().String()).Info("serving /liveness and /readiness over HTTPS")
	return s, nil
}

func shutdownAll(servers []shutdowner) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, s := range servers {
		_ = s.Shutdown(ctx)
	}
}
