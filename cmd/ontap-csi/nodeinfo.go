package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/ontap-csi/ontap-csi/controller/kubenodes"
	"github.com/ontap-csi/ontap-csi/node"
	"github.com/ontap-csi/ontap-csi/node/kubenode"
	"github.com/ontap-csi/ontap-csi/nodeinfo"
	"github.com/ontap-csi/ontap-csi/server"
)

// Node info in ontap-csi's own install (deploy/kustomize/base, the Helm
// chart): there is no Trident controller and no client certificate, so the
// node plugin annotates its own Node object (node/kubenode) and the
// controller reads the annotation (controller/kubenodes). Both only in a
// pod; outside a cluster the node reports nowhere and the controller knows
// only in-process nodes, as before.

// nodeAnnotationReporter returns the node role's Reporter through the
// Node annotation, or nil outside a cluster.
func nodeAnnotationReporter(kube *kubeAccess) *kubenode.Reporter {
	if kube == nil {
		return nil
	}
	logrus.WithField("annotation", nodeinfo.AnnotationKey).Info("node info is published as an annotation on this node's Node object")
	return kubenode.New(kube.client)
}

// nodeAnnotationRegistry returns the controller role's node registry
// reading Node annotations, or nil outside a cluster.
func nodeAnnotationRegistry(kube *kubeAccess) *kubenodes.Registry {
	if kube == nil {
		return nil
	}
	logrus.WithField("annotation", nodeinfo.AnnotationKey).Info("node info is read from the Node objects' annotation")
	return kubenodes.New(kube.client, kubenodes.DefaultTTL)
}

// kubeAccess is the process's access to the Kubernetes API from its pod:
// one config and one HTTP client, which every user of the API in the
// process shares, so the service account token is read once and one
// connection is set up, not one per user (the node role has four: its
// Node's topology labels, the node-info annotation, the stale cleanup, the
// registration's API checks). The dynamic client, because the typed
// clientset is not linked into the binary (registration/kubeapi.go).
type kubeAccess struct {
	cfg    *rest.Config
	hc     *http.Client
	client dynamic.Interface
}

// newKubeAccess connects to the API server of cfg.
func newKubeAccess(cfg *rest.Config) (*kubeAccess, error) {
	cfg = dynamic.ConfigFor(cfg)
	cfg.UserAgent = "ontap-csi/" + server.Version
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	client, err := dynamic.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	return &kubeAccess{cfg: cfg, hc: hc, client: client}, nil
}

// inClusterKube is the pod's access with its service account, or nil
// outside a pod; qps and burst are client-go's rate limit (0: its
// default). An unusable config is logged with what its absence means.
func inClusterKube(qps float32, burst int, without string) *kubeAccess {
	cfg, err := rest.InClusterConfig()
	if err == rest.ErrNotInCluster {
		return nil
	}
	if err == nil {
		cfg.QPS, cfg.Burst = qps, burst
		var kube *kubeAccess
		if kube, err = newKubeAccess(cfg); err == nil {
			return kube
		}
	}
	logrus.WithError(err).Warnf("Kubernetes API unusable: %s", without)
	return nil
}

// nodeTopology is what the node role's NodeGetInfo reports for the life of
// the process: --node-topology when given; else, with API access (in a
// pod, as under trident-operator, whose DaemonSet cannot be given the
// flag), the topology.kubernetes.io labels of its own Node, as Trident's
// node reports them (docs/design/trident-compat.md §3.1); else none.
// kube is the pod's API access, nil outside a pod.
//
// It is read once, before the CSI server serves, so that NodeGetInfo keeps
// answering from local state (docs/design/registration.md I6) and every
// generation on the node reports the same node info for the same Node
// labels: a registration with other node info makes kubelet rewrite CSINode
// and the node's topology labels, and a label clash fails it and drops the
// driver (docs/design/registration.md K5). So a Node that cannot be read is
// never papered over with a guess such as no topology: after kubenode's
// bounded retry the error stops the process before it binds the endpoint or
// registers, and the container's restart is the next try, as Trident's node
// retries its registration. The predecessor, if any, keeps serving
// meanwhile. Only a refusal by RBAC (kubenode.ErrNoNodeAccess) means no
// topology, because that is a fact of the install, the same for every
// generation. Labels changed later are seen by the next start only, as in
// Trident, which reads them at registration.
func nodeTopology(ctx context.Context, o *options, kube *kubeAccess) (map[string]string, error) {
	if o.topology != nil {
		return o.topology, nil
	}
	if kube == nil {
		return nil, nil
	}
	reader := kubenode.NewTopology(kube.client)
	reader.Bound = topologyBound
	topo, err := reader.Read(ctx, o.csiNodeName)
	if errors.Is(err, kubenode.ErrNoNodeAccess) {
		logrus.WithError(err).Warn("NodeGetInfo reports no topology: grant the node plugin get on nodes " +
			"to report the Node's topology.kubernetes.io labels, or give --node-topology")
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the Node's topology labels, which NodeGetInfo reports, cannot be read; "+
			"not registering with kubelet rather than with other node info (give --node-topology to not read them): %w", err)
	}
	logrus.WithFields(logrus.Fields{"node": o.csiNodeName, "topology": topo}).
		Info("NodeGetInfo reports the Node's topology labels as read at start")
	return topo, nil
}

// topologyBound is how long the node role retries reading its Node's
// topology labels before it gives up starting (tests shorten it).
var topologyBound = kubenode.DefaultTopologyBound

// staleCleanupTimeout bounds the cleanup of stale volumes at start-up: it
// delays registration, which during a rollout the predecessor covers only
// for its termination grace (docs/design/registration.md §5.4), and kubelet's
// own unpublish and unstage finish whatever it leaves.
const staleCleanupTimeout = 30 * time.Second

// cleanStale cleans, before the node plugin registers with kubelet, the
// volumes this node still holds that no VolumeAttachment names any more:
// those fenced and force-detached while the node was away
// (docs/design/fencing.md §4). Only in ontap-csi's own install, whose node
// ServiceAccount may list VolumeAttachments and get PersistentVolumes
// (deploy/); Trident's node ServiceAccount may not. A failure is logged and
// never stops the plugin.
func cleanStale(ctx context.Context, o *options, kube *kubeAccess, svc *node.Service) {
	if _, err := os.Stat(o.tridentAPI.clientCert); err == nil {
		return // under Trident's DaemonSet
	}
	if kube == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, staleCleanupTimeout)
	defer cancel()
	cleaned, err := svc.CleanStale(ctx, kubenode.NewAttachments(kube.client, o.driverName))
	if err != nil {
		logrus.WithError(err).Warn("stale volumes not cleaned at start; nothing was touched")
		return
	}
	if len(cleaned) > 0 {
		logrus.WithField("volumes", cleaned).Info("cleaned the volumes no longer attached to this node before registering")
	}
}
