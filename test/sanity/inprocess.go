// Package sanity runs csi-test's sanity suite against the real ontap-csi
// binary (Run, used by ./nas and ./san, one Ginkgo suite per process), and
// holds the controller's end-to-end tests — Trident compatibility, fault
// tolerance, benchmarks — which drive the controller in-process: they
// attach a fresh controller per step, shorten the ONTAP client's retry
// delays, or time calls without a process boundary, none of which a
// process would allow or measure better.
package sanity

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap"
	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/backends/ontap/rest"
	"github.com/ontap-csi/ontap-csi/controller"
	"github.com/ontap-csi/ontap-csi/server"
	"github.com/ontap-csi/ontap-csi/test/e2e/plugintest"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

// DriverName is Trident's CSI driver name.
const DriverName = "csi.trident.netapp.io"

// The test node.
const (
	NodeID  = "sanity-node-1"
	NodeIQN = "iqn.1994-05.com.redhat:sanity-node-1"
)

// NodeIPs are the test node's addresses; the second lies outside the
// autoExportCIDRs of the NAS backend, so export rules must filter it out.
var NodeIPs = []string{"10.10.0.5", "192.168.77.5"}

// backendKeys are the backend config keys of the tests beyond
// plugintest.WriteBackendConfig's, extra last.
func backendKeys(driver string, extra map[string]any) map[string]any {
	keys := map[string]any{}
	switch driver {
	case config.DriverONTAPNAS:
		keys["autoExportPolicy"] = true
		keys["autoExportCIDRs"] = []string{"10.10.0.0/16"}
	case config.DriverONTAPNASEconomy:
		keys["autoExportPolicy"] = true
		keys["autoExportCIDRs"] = []string{"10.10.0.0/16"}
		// Snapshots of qtrees need the .snapshot directory (Trident's
		// CanSnapshot); pools go as soon as they are empty, so nothing
		// is left when the test ends.
		keys["defaults"] = map[string]any{"snapshotDir": "true"}
		keys["emptyFlexvolDeferredDeletePeriod"] = "0"
	}
	for k, v := range extra {
		keys[k] = v
	}
	return keys
}

// Options describe an in-process controller under test.
type Options struct {
	// Driver is config.DriverONTAPNAS, DriverONTAPSAN or an economy one.
	Driver string
	// Backend holds extra or overriding keys of the backend config.
	Backend map[string]any
	Sim     ontapsim.Config
	// FastRetries shortens the ONTAP client's retry delays (fault tests).
	FastRetries bool
	// Claims reads the claims CreateVolume names (Trident's PVC
	// annotations); nil: no Kubernetes API, as under csi-sanity.
	Claims controller.ClaimReader
	// Records reads volumes' PVs and TridentVolumes; nil: none.
	Records controller.VolumeRecords
}

// Plugin is an in-process controller with its simulator: the Identity
// and Controller services of ontap-csi --csi_role=allInOne, assembled as
// cmd/ontap-csi does (backend config parsed by config.Load,
// ontap.NewBackend, controller.New), its node known to the in-process node
// registry, served over a unix socket.
type Plugin struct {
	Sim        *ontapsim.Simulator
	Nodes      *controller.Nodes
	Backend    backends.Backend
	ConfigFile string
	Controller csi.ControllerClient
	Group      csi.GroupControllerClient
}

// Start runs a simulator and an in-process controller serving one backend
// on it. All of it is torn down when the test ends.
func Start(t testing.TB, o Options) *Plugin {
	t.Helper()
	s, err := ontapsim.New(o.Sim)
	if err != nil {
		t.Fatalf("simulator: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Start("127.0.0.1:0", true); err != nil {
		t.Fatalf("simulator start: %v", err)
	}
	return Attach(t, s, o)
}

// Attach runs an in-process controller on a running simulator: a second
// one on the same simulator is a restarted controller, or a second replica.
func Attach(t testing.TB, s *ontapsim.Simulator, o Options) *Plugin {
	t.Helper()
	dir := t.TempDir()
	cfgFile := plugintest.WriteBackendConfig(t, dir, s, o.Driver, backendKeys(o.Driver, o.Backend))
	cfg, err := config.Load(cfgFile)
	if err != nil {
		t.Fatalf("backend config: %v", err)
	}
	opts := ontap.Options{}
	if o.FastRetries {
		opts.Client = func(c *rest.ClientConfig) {
			c.RetryBaseDelay, c.RetryMaxDelay, c.MaxRetryAfter = time.Millisecond, 20*time.Millisecond, 20*time.Millisecond
			c.JobPollInitial, c.JobPollMax = time.Millisecond, 20*time.Millisecond
		}
	}
	b, err := ontap.NewBackend(cfg, opts)
	if err != nil {
		t.Fatalf("backend: %v", err)
	}
	nodes := controller.NewNodes()
	nodes.Set(backends.Node{Name: NodeID, IQN: NodeIQN, IPs: NodeIPs})
	ctrl, err := controller.New(controller.Config{Backends: []backends.Backend{b}, Nodes: nodes, Claims: o.Claims, Records: o.Records})
	if err != nil {
		t.Fatalf("controller: %v", err)
	}

	srv := server.NewGRPCServer()
	csi.RegisterIdentityServer(srv, server.NewIdentity(DriverName, server.Version, []*csi.PluginCapability{
		server.ServiceCapability(csi.PluginCapability_Service_CONTROLLER_SERVICE),
		server.ServiceCapability(csi.PluginCapability_Service_GROUP_CONTROLLER_SERVICE),
		server.ServiceCapability(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS),
		server.OnlineExpansionCapability(),
	}))
	csi.RegisterControllerServer(srv, ctrl)
	csi.RegisterGroupControllerServer(srv, ctrl)
	sock := filepath.Join(dir, "csi.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	go srv.Serve(l) //nolint:errcheck // ends with Stop
	t.Cleanup(srv.Stop)

	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return &Plugin{Sim: s, Nodes: nodes, Backend: b, ConfigFile: cfgFile,
		Controller: csi.NewControllerClient(conn), Group: csi.NewGroupControllerClient(conn)}
}

// Ctx is a context bounded for one test step.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// AssertClean fails the test if ONTAP holds anything the controller made
// that should be gone.
func (p *Plugin) AssertClean(t testing.TB) {
	t.Helper()
	plugintest.AssertONTAPClean(t, p.Sim)
}
