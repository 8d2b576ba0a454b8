package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/controller"
	"github.com/ontap-csi/ontap-csi/controller/inventory"
	"github.com/ontap-csi/ontap-csi/controller/kubenodes"
	"github.com/ontap-csi/ontap-csi/controller/kubevolumes"
	"github.com/ontap-csi/ontap-csi/node"
	"github.com/ontap-csi/ontap-csi/server"
)

// serveMain runs the binary without a subcommand: parse, then serve until
// SIGTERM or SIGINT.
func serveMain(args []string) int {
	o, fs, err := parseOptions(args)
	if errors.Is(err, flag.ErrHelp) {
		printUsage(fs, os.Stdout)
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "ontap-csi: %v\n", err)
		return 2
	}
	setupLogging(o.logFormat, o.logLevel, o.debug)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := serve(ctx, o); err != nil {
		logrus.Errorf("ontap-csi: %v", err)
		return 1
	}
	return 0
}

// serve runs one role until ctx ends: the Identity service, then the
// role's services, then the sockets and health endpoints. What CSI Probe
// answers in each role, and why, is server.Identity.Probe's comment.
func serve(ctx context.Context, o *options) error {
	log := logrus.WithFields(logrus.Fields{"role": o.csiRole, "node": o.csiNodeName})
	log.WithFields(logrus.Fields{
		"version": server.Version, "driver": o.driverName, "endpoint": o.endpointPath,
	}).Info("ontap-csi starting")
	server.SetTridentBuildInfo(tridentVersion)
	if given := o.ignored.Given(); len(given) > 0 {
		log.Infof("ignoring Trident flags that ontap-csi does not implement: %s", strings.Join(given, " "))
	}

	// Every role needs the endpoint's directory, and the node's lock dir
	// defaults into it: a failure names the flag, not what tripped over it.
	if err := os.MkdirAll(filepath.Dir(o.endpointPath), 0o750); err != nil {
		return fmt.Errorf("--csi_endpoint %s: %w", o.csiEndpoint, err)
	}

	grpcServer := server.NewGRPCServer()
	csi.RegisterIdentityServer(grpcServer, server.NewIdentity(o.driverName, server.Version, pluginCapabilities(o.csiRole)))
	var servers running
	defer servers.stop()
	var reporter node.Reporter
	var kube *kubeAccess // the node role's, shared by all its uses
	if o.csiRole == roleNode {
		kube = inClusterKube(0, 0, "NodeGetInfo reports no topology but --node-topology, node info reaches a controller "+
			"only through Trident's client certificate, stale volumes of a fenced node are not cleaned at start, "+
			"and registration runs without API checks")
		// Before anything serves: NodeGetInfo's answer (nodeinfo.go).
		topo, err := nodeTopology(ctx, o, kube)
		if err != nil {
			return err
		}
		o.topology = topo
		// Under Trident's DaemonSet: PUT /trident/v1/node to the controller;
		// in our own install: an annotation on the Node (nodeinfo.go).
		reporter = nodeReporter(&o.tridentAPI, kube, o.topology)
	} else {
		var err error
		if reporter, err = startController(ctx, o, grpcServer, &servers); err != nil {
			return err
		}
	}
	if o.csiRole != roleController {
		nodeSvc, err := newNode(o, reporter)
		if err != nil {
			return err
		}
		csi.RegisterNodeServer(grpcServer, nodeSvc)
		nodeSvc.Start(ctx)
		if o.csiRole == roleNode {
			cleanStale(ctx, o, kube, nodeSvc) // before registration (nodeinfo.go)
		}
	}
	if o.csiRole == roleNode {
		return serveRegistered(ctx, o, kube, grpcServer, &servers, log)
	}
	return serveEndpoint(ctx, o, grpcServer, &servers, log)
}

// startController registers the controller service (controller and allInOne
// roles), starts the inventory of its backends and Trident's REST servers.
// It returns the Reporter through which allInOne's own node registers,
// in-process.
func startController(ctx context.Context, o *options, grpcServer *grpc.Server, servers *running) (node.Reporter, error) {
	bs, err := loadBackends(o)
	if err != nil {
		return nil, err
	}
	nodes := controller.NewNodes()
	cfg := controller.Config{Backends: bs, Nodes: nodes, ForceDetach: o.enableForceDetach}
	// The inventory checks and lists what the controller serves, and reads
	// the cluster where it can; it runs once both are known.
	facts := &clusterFacts{driver: o.driverName, countNodes: func(context.Context) (int, error) { return nodes.Len(), nil }}
	var ctrl *controller.Service
	inv := inventory.New(facts.config(o.backendPollInterval, func() []backends.Backend { return ctrl.Backends() }))
	// Under Trident's Deployment (--crd_persistence): node records are
	// TridentNodes and backends come from TridentBackendConfigs too.
	var tc *tridentController
	if o.tridentAPI.crdPersistence {
		if tc, err = newTridentController(ctx, &o.tridentAPI, backendNames(bs), inv); err != nil {
			return nil, err
		}
		cfg.Nodes, cfg.BackendSource = tc.nodes, tc.backends
		facts.kube, facts.countNodes = tc.kube, tridentNodeCount(tc.nodes)
	} else if o.csiRole == roleController {
		// ontap-csi's own install: node plugins annotate their Node
		// objects. allInOne keeps its in-process registry. Trident's API
		// rate flags apply: publishing to many nodes at once is one GET
		// per node, which client-go's default 5 QPS would spread over
		// seconds.
		kube := inClusterKube(float32(o.tridentAPI.k8sQPS), o.tridentAPI.k8sBurst,
			"only nodes known in-process can be published to, and the metrics do not count PersistentVolumes, StorageClasses or nodes")
		if r := nodeAnnotationRegistry(kube); r != nil {
			cfg.Nodes = r
			facts.kube = kube.client
			facts.countNodes = facts.annotatedNodes
		}
	}
	if facts.kube != nil {
		// Trident's trident.netapp.io annotations of the claim a
		// CreateVolume names (csi-provisioner --extra-create-metadata),
		// and the ONTAP names that PVs and TridentVolumes record.
		// Under Trident's Deployment its csi-provisioner does not name the
		// claim, and Trident's role may list claims to find it by UID.
		tridentNS := ""
		if tc != nil {
			tridentNS = tc.namespace
		}
		cfg.Claims = kubevolumes.NewClaims(facts.kube, tc != nil)
		// Fencing before a detach reads the Node's taints and Ready
		// condition (controller/fencing.go).
		cfg.NodeStates = kubenodes.NewStates(facts.kube)
		cfg.Records = kubevolumes.NewRecords(facts.kube, o.driverName, tridentNS)
	}
	if ctrl, err = newController(cfg); err != nil {
		return nil, err
	}
	csi.RegisterControllerServer(grpcServer, ctrl)
	csi.RegisterGroupControllerServer(grpcServer, ctrl)
	prometheus.MustRegister(inv)
	go inv.Run(ctx)
	rest, err := serveTridentREST(&o.tridentAPI, tc, inv)
	if err != nil {
		return nil, err
	}
	servers.add(rest...)
	return node.ReporterFunc(func(_ context.Context, n backends.Node) error {
		nodes.Set(n)
		return nil
	}), nil
}

// serveRegistered serves the node role. The registration manager owns the
// CSI sockets: it binds E and --csi_endpoint by atomic rename and registers
// with kubelet (docs/design/registration.md). The pod is ready once kubelet
// registered it.
func serveRegistered(ctx context.Context, o *options, kube *kubeAccess, grpcServer *grpc.Server, servers *running, log *logrus.Entry) error {
	reg, err := newRegistration(o, kube, grpcServer.Serve)
	if err != nil {
		return err
	}
	if uid := os.Getenv("POD_UID"); uid != "" {
		// The readiness that orders a rollout must be this pod's own
		// (server.ServePodHealth); deploy/ asks it with `ontap-csi probe`.
		h, err := server.ServePodHealth(uid, reg.Ready)
		if err != nil {
			return err
		}
		servers.add(h)
	}
	if o.tridentAPI.httpsREST {
		probes, err := serveNodeProbes(&o.tridentAPI, reg.Ready)
		if err != nil {
			return err
		}
		servers.add(probes)
	}
	if err := startHealth(o, reg.Ready, servers, log); err != nil {
		return err
	}
	// Run returns after SIGTERM once a successor took over E or the
	// handover grace ran out; it never unlinks a path (I2, I7).
	err = reg.Run(ctx)
	drain(grpcServer, o.drainTimeout)
	if err != nil {
		return fmt.Errorf("registration: %w", err)
	}
	log.Info("ontap-csi stopped")
	return nil
}

// serveEndpoint serves the controller and allInOne roles on --csi_endpoint
// until ctx ends. Nothing gates their readiness: /readyz answers ok.
func serveEndpoint(ctx context.Context, o *options, grpcServer *grpc.Server, servers *running, log *logrus.Entry) error {
	if err := startHealth(o, nil, servers, log); err != nil {
		return err
	}
	sock, err := server.Listen(o.endpointPath)
	if err != nil {
		return fmt.Errorf("cannot serve CSI on --csi_endpoint %s: %w", o.csiEndpoint, err)
	}
	served := make(chan error, 1)
	go func() { served <- grpcServer.Serve(sock) }()
	log.WithField("socket", o.endpointPath).Info("serving CSI")

	select {
	case <-ctx.Done():
		log.Info("signal received, shutting down")
	case err := <-served:
		return fmt.Errorf("CSI server stopped: %w", err)
	}
	drain(grpcServer, o.drainTimeout)
	if err := sock.Remove(); err != nil {
		log.WithError(err).Warn("could not remove CSI socket")
	}
	log.Info("ontap-csi stopped")
	return nil
}

// startHealth serves /healthz, /readyz (ready; nil: always) and /metrics on
// --metrics-address, if one is given.
func startHealth(o *options, ready func() bool, servers *running, log *logrus.Entry) error {
	if o.metricsAddress == "" {
		return nil
	}
	h, err := server.ServeHealth(o.metricsAddress, ready, o.csiRole == roleNode)
	if err != nil {
		return err
	}
	log.WithField("address", h.Addr().String()).Info("serving /healthz, /readyz and /metrics")
	servers.add(h)
	return nil
}

// running are the servers serve started besides CSI, stopped when it
// returns, the last started first.
type running []shutdowner

func (r *running) add(s ...shutdowner) { *r = append(*r, s...) }

func (r running) stop() {
	for i := len(r) - 1; i >= 0; i-- {
		shutdownAll(r[i : i+1])
	}
}

// drain lets calls in flight finish, but not for longer than timeout: a
// stuck call must not keep a terminating pod alive past its grace period.
func drain(s *grpc.Server, timeout time.Duration) {
	done := make(chan struct{})
	go func() { s.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		logrus.WithField("timeout", timeout).Warn("calls still in flight after the drain timeout; stopping anyway")
		s.Stop()
	}
}

func pluginCapabilities(role string) []*csi.PluginCapability {
	caps := []*csi.PluginCapability{
		server.ServiceCapability(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS),
	}
	if role != roleNode {
		caps = append(caps,
			server.ServiceCapability(csi.PluginCapability_Service_CONTROLLER_SERVICE),
			// Volume group snapshots, as Trident 26.06.
			server.ServiceCapability(csi.PluginCapability_Service_GROUP_CONTROLLER_SERVICE),
			server.OnlineExpansionCapability())
	}
	return caps
}
