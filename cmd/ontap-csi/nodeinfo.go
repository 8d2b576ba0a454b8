package main

import (
	"context"
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
func nodeAnnotationReporter() *kubenode.Reporter {
	cfg := inClusterConfig("node info is not reported to a controller")
	if cfg == nil {
		return nil
	}
	client, err := nodeInfoClient(cfg)
	if err != nil {
		logrus.WithError(err).Warn("Kubernetes client unusable: node info is not reported to a controller")
		return nil
	}
	logrus.WithField("annotation", nodeinfo.AnnotationKey).Info("node info is published as an annotation on this node's Node object")
	return kubenode.New(client)
}

// nodeAnnotationRegistry returns the controller role's node registry
// reading Node annotations, or nil outside a cluster.
func nodeAnnotationRegistry(t *tridentAPIOptions) *kubenodes.Registry {
	client := inClusterDynamic(t, "only nodes known in-process can be published to")
	if client == nil {
		return nil
	}
	logrus.WithField("annotation", nodeinfo.AnnotationKey).Info("node info is read from the Node objects' annotation")
	return kubenodes.New(client, kubenodes.DefaultTTL)
}

// inClusterDynamic is a dynamic client with the pod's service account and
// Trident's API rate flags (publishing to many nodes at once is one GET per
// node, which client-go's default 5 QPS would spread over seconds), or nil
// outside a pod; without says what its absence means.
func inClusterDynamic(t *tridentAPIOptions, without string) dynamic.Interface {
	cfg := inClusterConfig(without)
	if cfg == nil {
		return nil
	}
	cfg.QPS, cfg.Burst = float32(t.k8sQPS), t.k8sBurst
	client, err := nodeInfoClient(cfg)
	if err != nil {
		logrus.WithError(err).Warn("Kubernetes client unusable: " + without)
		return nil
	}
	return client
}

// inClusterConfig is the pod's service account config, or nil when not in
// a pod. An unusable config is logged with what its absence means.
func inClusterConfig(without string) *rest.Config {
	cfg, err := rest.InClusterConfig()
	if err == rest.ErrNotInCluster {
		return nil
	}
	if err != nil {
		logrus.WithError(err).Warnf("in-cluster Kubernetes config unusable: %s", without)
		return nil
	}
	return cfg
}

// nodeInfoClient is a dynamic client for cfg: the typed clientset is not
// linked into the binary (registration/kubeapi.go).
func nodeInfoClient(cfg *rest.Config) (dynamic.Interface, error) {
	cfg = dynamic.ConfigFor(cfg)
	cfg.UserAgent = "ontap-csi/" + server.Version
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return dynamic.NewForConfigAndClient(cfg, hc)
}

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
func cleanStale(ctx context.Context, o *options, svc *node.Service) {
	if _, err := os.Stat(o.tridentAPI.clientCert); err == nil {
		return // under Trident's DaemonSet
	}
	cfg := inClusterConfig("stale volumes of a fenced node are not cleaned at start")
	if cfg == nil {
		return
	}
	client, err := nodeInfoClient(cfg)
	if err != nil {
		logrus.WithError(err).Warn("Kubernetes client unusable: stale volumes of a fenced node are not cleaned at start")
		return
	}
	ctx, cancel := context.WithTimeout(ctx, staleCleanupTimeout)
	defer cancel()
	cleaned, err := svc.CleanStale(ctx, kubenode.NewAttachments(client, o.driverName))
	if err != nil {
		logrus.WithError(err).Warn("stale volumes not cleaned at start; nothing was touched")
		return
	}
	if len(cleaned) > 0 {
		logrus.WithField("volumes", cleaned).Info("cleaned the volumes no longer attached to this node before registering")
	}
}
