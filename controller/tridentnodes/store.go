// Package tridentnodes keeps the controller's node records as Trident's
// TridentNode resources (tridentnodes.trident.netapp.io/v1, in the
// controller's namespace). Node plugins report themselves through
// PUT /trident/v1/node/<name> (package tridentrest); the records outlive a
// controller restart, are the ones a Trident controller wrote before us,
// and are the ones it reads again after a roll-back.
package tridentnodes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/controller"
	"github.com/ontap-csi/ontap-csi/nodeinfo"
)

// GVR is the TridentNode resource.
var GVR = schema.GroupVersionResource{Group: "trident.netapp.io", Version: "v1", Resource: "tridentnodes"}

// Finalizer is the one Trident puts on the resources it manages; ours carry
// it too, so that Trident treats them as its own after a roll-back.
const Finalizer = "trident.netapp.io"

// storedFields are the nodeinfo.TridentNode fields a TridentNode resource
// holds at its top level: all but the REST body's topologyLabels.
var storedFields = []string{
	"name", "iqn", "nqn", "hostWWPNMap", "ips", "nodePrep", "hostInfo",
	"deleted", "publicationState", "logLevel", "logWorkflows", "logLayers",
}

// ErrNotFound means there is no record of the node.
var ErrNotFound = errors.New("node not found")

// Store reads and writes TridentNode resources in one namespace. It
// implements controller.NodeRegistry.
type Store struct {
	client    dynamic.ResourceInterface
	namespace string
}

var _ controller.NodeRegistry = (*Store)(nil)

// New returns a store of the TridentNodes in namespace.
func New(client dynamic.Interface, namespace string) *Store {
	return &Store{client: client.Resource(GVR).Namespace(namespace), namespace: namespace}
}

// objectNameRE matches what Trident's NameFix replaces in a node name to
// make it an object name.
var objectNameRE = regexp.MustCompile(`[^a-z0-9.\-]`)

// ObjectName is the TridentNode name of a node, as Trident derives it.
func ObjectName(node string) string {
	return objectNameRE.ReplaceAllString(strings.ToLower(node), "-")
}

// Put creates or updates the record of n.Name and returns what is stored.
// A node that is already known keeps its publication state, as in Trident:
// a node plugin restart does not make a node that was marked unsafe clean.
func (s *Store) Put(ctx context.Context, n nodeinfo.TridentNode) (*nodeinfo.TridentNode, error) {
	if n.Name == "" {
		return nil, errors.New("node name is empty")
	}
	n.TopologyLabels = nil
	var stored *nodeinfo.TridentNode
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, err := s.client.Get(ctx, ObjectName(n.Name), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			if n.PublicationState == "" {
				n.PublicationState = "clean"
			}
			obj = &unstructured.Unstructured{Object: map[string]any{}}
			obj.SetAPIVersion(GVR.GroupVersion().String())
			obj.SetKind("TridentNode")
			obj.SetName(ObjectName(n.Name))
			obj.SetNamespace(s.namespace)
			obj.SetFinalizers([]string{Finalizer})
			if err := setFields(obj, n); err != nil {
				return err
			}
			created, err := s.client.Create(ctx, obj, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			stored, err = fromObject(created)
			return err
		case err != nil:
			return err
		}
		old, err := fromObject(obj)
		if err != nil {
			// A record that does not parse (edited by hand, written by a
			// newer Trident) must not lock its node out for good: the
			// node's own report replaces its fields, keeping the object
			// and a publication state that still reads as one.
			logrus.WithContext(ctx).WithError(err).Warn("TridentNode unreadable; replacing its fields with the node's report")
			old = &nodeinfo.TridentNode{Name: n.Name}
			if ps, ok := obj.Object["publicationState"].(string); ok {
				old.PublicationState = ps
			}
		}
		if old.Name != n.Name {
			return fmt.Errorf("TridentNode %s belongs to node %q, not %q", obj.GetName(), old.Name, n.Name)
		}
		if old.PublicationState != "" {
			n.PublicationState = old.PublicationState
		}
		if err := setFields(obj, n); err != nil {
			return err
		}
		updated, err := s.client.Update(ctx, obj, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		stored, err = fromObject(updated)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("TridentNode for %s: %w", n.Name, err)
	}
	return stored, nil
}

// Get returns the record of a node, or an error wrapping ErrNotFound.
func (s *Store) Get(ctx context.Context, name string) (*nodeinfo.TridentNode, error) {
	obj, err := s.client.Get(ctx, ObjectName(name), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("node %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("TridentNode for %s: %w", name, err)
	}
	n, err := fromObject(obj)
	if err != nil {
		return nil, err
	}
	if n.Name != name {
		// Two node names that map to one object name: not this node's.
		return nil, fmt.Errorf("node %q: %w", name, ErrNotFound)
	}
	return n, nil
}

// List returns every node record, sorted by name. Records that do not
// parse are skipped: one bad object must not hide the others.
func (s *Store) List(ctx context.Context) ([]nodeinfo.TridentNode, error) {
	list, err := s.client.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("TridentNodes: %w", err)
	}
	out := make([]nodeinfo.TridentNode, 0, len(list.Items))
	for i := range list.Items {
		if n, err := fromObject(&list.Items[i]); err == nil {
			out = append(out, *n)
		}
	}
	slices.SortFunc(out, func(a, b nodeinfo.TridentNode) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Delete removes the record of a node. Trident's finalizer is taken off
// first: nothing else would remove it, and the object would stay
// terminating forever.
func (s *Store) Delete(ctx context.Context, name string) error {
	if _, err := s.Get(ctx, name); err != nil {
		return err
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, err := s.client.Get(ctx, ObjectName(name), metav1.GetOptions{})
		if err != nil {
			return err
		}
		fins := obj.GetFinalizers()
		if !slices.Contains(fins, Finalizer) {
			return nil
		}
		obj.SetFinalizers(slices.DeleteFunc(fins, func(f string) bool { return f == Finalizer }))
		_, err = s.client.Update(ctx, obj, metav1.UpdateOptions{})
		return err
	})
	if err == nil {
		err = s.client.Delete(ctx, ObjectName(name), metav1.DeleteOptions{})
	}
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("node %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("TridentNode for %s: %w", name, err)
	}
	return nil
}

// Node implements controller.NodeRegistry.
func (s *Store) Node(ctx context.Context, nodeID string) (*backends.Node, error) {
	n, err := s.Get(ctx, nodeID)
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%w (no TridentNode: the node plugin has not registered with the controller)", controller.ErrNodeNotFound)
	}
	if err != nil {
		return nil, err
	}
	return &backends.Node{Name: n.Name, IQN: n.IQN, IPs: slices.Clone(n.IPs)}, nil
}

// setFields writes n's stored fields at the top level of obj, keeping any
// other field (a newer Trident's) as it is.
func setFields(obj *unstructured.Unstructured, n nodeinfo.TridentNode) error {
	data, err := json.Marshal(n)
	if err != nil {
		return err
	}
	var fields map[string]any
	if err := json.Unmarshal(data, &fields); err != nil {
		return err
	}
	for _, k := range storedFields {
		if v, ok := fields[k]; ok {
			obj.Object[k] = v
		} else {
			delete(obj.Object, k)
		}
	}
	return nil
}

func fromObject(obj *unstructured.Unstructured) (*nodeinfo.TridentNode, error) {
	fields := map[string]any{}
	for _, k := range storedFields {
		if v, ok := obj.Object[k]; ok {
			fields[k] = v
		}
	}
	data, err := json.Marshal(fields)
	if err != nil {
		return nil, err
	}
	var n nodeinfo.TridentNode
	if err := json.Unmarshal(data, &n); err != nil {
		return nil, fmt.Errorf("TridentNode %s: %w", obj.GetName(), err)
	}
	if n.Name == "" {
		return nil, fmt.Errorf("TridentNode %s has no node name", obj.GetName())
	}
	return &n, nil
}
