// Package kubenode is the node plugin's use of the Kubernetes API: its
// topology from its own Node's labels (Topology), the VolumeAttachments of
// its node (Attachments), and, here, the node info for the controller.
//
// It publishes the node info (IQN, IPs) for the controller as
// an annotation on the node's own Kubernetes Node object. This is how the
// node plugin reports in ontap-csi's own install (deploy/kustomize/base, the
// Helm chart), where there is no Trident controller to PUT
// /trident/v1/node to and no client certificate to do it with. The
// controller reads the annotation back (package controller/kubenodes); its
// key and schema are package nodeinfo's.
//
// It uses the dynamic client only: the typed clientset would cost the node
// plugin ~10 MiB of RSS (registration/kubeapi.go).
package kubenode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/node"
	"github.com/ontap-csi/ontap-csi/nodeinfo"
)

// FieldManager names ontap-csi as the writer of the annotation in the
// Node's managedFields.
const FieldManager = "ontap-csi"

// DefaultTimeout bounds one report (the GET and the PATCH together).
const DefaultTimeout = 30 * time.Second

// Reporter implements node.Reporter by patching the annotation onto the
// Node named by the node info (--csi_node_name, the Kubernetes node name).
type Reporter struct {
	nodes   dynamic.NamespaceableResourceInterface
	timeout time.Duration
}

var _ node.Reporter = (*Reporter)(nil)

// New returns a Reporter that writes through client. It does no I/O.
// The ServiceAccount needs get and patch on nodes.
func New(client dynamic.Interface) *Reporter {
	return &Reporter{nodes: client.Resource(nodeinfo.NodesGVR), timeout: DefaultTimeout}
}

// ReportNode publishes info on its Node. The node service calls it in the
// background, with freshly discovered info on every attempt, and retries
// with backoff until it succeeds. The Node is read first: when the
// annotation already holds this info (a plugin restart, a handover between
// two generations) nothing is written; when it differs or is missing, a
// merge patch replaces the annotation and touches nothing else on the Node.
func (r *Reporter) ReportNode(ctx context.Context, info backends.Node) error {
	if info.Name == "" {
		return errors.New("node name is empty")
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	obj, err := r.nodes.Get(ctx, info.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("Node %q does not exist: --csi_node_name must be the Kubernetes node name", info.Name)
	}
	if err != nil {
		return fmt.Errorf("reading Node %s: %w", info.Name, err)
	}
	if cur, ok := obj.GetAnnotations()[nodeinfo.AnnotationKey]; ok {
		if have, err := nodeinfo.ParseAnnotation(cur); err == nil && equal(have, info) {
			logrus.WithField("node", info.Name).Debug("node info on the Node is current")
			return nil
		}
	}
	value, err := nodeinfo.Annotation(info)
	if err != nil {
		return err
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{nodeinfo.AnnotationKey: value}},
	})
	if err != nil {
		return err
	}
	if _, err := r.nodes.Patch(ctx, info.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager}); err != nil {
		return fmt.Errorf("annotating Node %s with %s: %w", info.Name, nodeinfo.AnnotationKey, err)
	}
	return nil
}

// equal compares node info as reported. Addresses in another order count as
// a change: the node sorts what it discovers, so that costs at most one
// harmless rewrite.
func equal(a, b backends.Node) bool {
	return a.Name == b.Name && a.IQN == b.IQN && slices.Equal(a.IPs, b.IPs)
}
