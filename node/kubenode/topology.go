package kubenode

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/ontap-csi/ontap-csi/nodeinfo"
)

// ErrNoNodeAccess: the ServiceAccount may not get Nodes, as under the node
// ClusterRole of Trident releases whose controller read the labels for the
// node, or an install that withholds the grant. That is a fact of the
// install, the same for every generation of the node plugin, not a
// passing failure.
var ErrNoNodeAccess = errors.New("the ServiceAccount may not get Nodes")

// Defaults of Topology's retry: a read that fails for any reason but the
// two final ones (ErrNoNodeAccess, the Node not existing) is tried again,
// waiting DefaultTopologyBackoff, doubling up to maxTopologyBackoff, until
// DefaultTopologyBound has passed since the first try. The bound stays
// below what the node DaemonSet's liveness probe allows an unserving start
// (5 failures 10 s apart), so the failure is ours to report, not a kill.
const (
	DefaultTopologyBound   = 30 * time.Second
	DefaultTopologyBackoff = time.Second
	maxTopologyBackoff     = 8 * time.Second
)

// Topology reads the node plugin's own Node for the topology segments that
// NodeGetInfo reports when --node-topology is not given: the Node's labels
// with Trident's prefix (nodeinfo.TopologyLabels), as Trident's NodeGetInfo
// answers with. It needs get on nodes.
type Topology struct {
	nodes dynamic.NamespaceableResourceInterface
	// Bound and Backoff shape the retry (the defaults above).
	Bound, Backoff time.Duration
}

// NewTopology returns a reader through client. It does no I/O.
func NewTopology(client dynamic.Interface) *Topology {
	return &Topology{nodes: client.Resource(nodeinfo.NodesGVR), Bound: DefaultTopologyBound, Backoff: DefaultTopologyBackoff}
}

// Read returns the topology labels of Node nodeName, nil when it has none.
// It is called once, before the node plugin serves CSI, and its answer is
// NodeGetInfo's for the life of the process: a pure function of the Node's
// labels, so every generation on a node reports the same node info for the
// same labels (docs/design/registration.md K5, I6).
//
// Errors: ErrNoNodeAccess (wrapped) when the API forbids the read; the
// Node not existing (a wrong --csi_node_name) at once; any other failure
// once Bound has passed. Neither is retried further here: the caller must
// not answer NodeGetInfo with other topology instead.
func (t *Topology) Read(ctx context.Context, nodeName string) (map[string]string, error) {
	if nodeName == "" {
		return nil, errors.New("node name is empty")
	}
	bound := t.Bound
	if bound <= 0 {
		bound = DefaultTopologyBound
	}
	deadline := time.Now().Add(bound)
	wait := t.Backoff
	for attempt := 1; ; attempt++ {
		labels, err := t.get(ctx, nodeName, deadline)
		if err == nil {
			if attempt > 1 {
				logrus.WithFields(logrus.Fields{"node": nodeName, "attempts": attempt}).Info("read the Node's topology labels after retrying")
			}
			return labels, nil
		}
		if errors.Is(err, ErrNoNodeAccess) || apierrors.IsNotFound(err) || !time.Now().Add(wait).Before(deadline) {
			return nil, err
		}
		logrus.WithError(err).WithFields(logrus.Fields{"node": nodeName, "retryIn": wait}).
			Warn("cannot read the Node's topology labels yet; not serving CSI until they are read")
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("reading Node %s: %w (last error: %v)", nodeName, ctx.Err(), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, maxTopologyBackoff)
	}
}

// get reads once, for no longer than DefaultTimeout nor past deadline: a
// hanging API server must not stretch the whole read beyond its bound.
func (t *Topology) get(ctx context.Context, nodeName string, deadline time.Time) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, min(DefaultTimeout, time.Until(deadline)))
	defer cancel()
	obj, err := t.nodes.Get(ctx, nodeName, metav1.GetOptions{})
	switch {
	case apierrors.IsForbidden(err):
		return nil, fmt.Errorf("reading Node %s: %w: %v", nodeName, ErrNoNodeAccess, err)
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("Node %q does not exist: --csi_node_name must be the Kubernetes node name: %w", nodeName, err)
	case err != nil:
		return nil, fmt.Errorf("reading Node %s: %w", nodeName, err)
	}
	labels := nodeinfo.TopologyLabels(obj.GetLabels())
	if len(labels) == 0 {
		return nil, nil
	}
	return labels, nil
}
