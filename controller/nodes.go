package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/ontap-csi/ontap-csi/backends"
)

// NodeRegistry tells the controller who a node is (backends.Node: what a
// backend needs to grant it access; its Name is the node ID, the
// Kubernetes node name). In allInOne the local node
// registers in-process (Nodes); elsewhere the information comes from the
// node plugins through Trident's REST API or TridentNode objects.
type NodeRegistry interface {
	// Node returns the node with the given ID, or an error wrapping
	// ErrNodeNotFound.
	Node(ctx context.Context, nodeID string) (*backends.Node, error)
}

// ErrNodeNotFound means the registry does not know the node.
var ErrNodeNotFound = errors.New("node not found")

// Nodes is an in-process NodeRegistry.
type Nodes struct {
	mu    sync.RWMutex
	nodes map[string]backends.Node
}

// NewNodes returns an empty registry.
func NewNodes() *Nodes { return &Nodes{nodes: map[string]backends.Node{}} }

// Set adds or replaces a node.
func (n *Nodes) Set(info backends.Node) {
	info.IPs = slices.Clone(info.IPs)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.nodes[info.Name] = info
}

// Remove forgets a node.
func (n *Nodes) Remove(name string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.nodes, name)
}

// Len is the number of nodes known.
func (n *Nodes) Len() int {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return len(n.nodes)
}

// Node implements NodeRegistry.
func (n *Nodes) Node(_ context.Context, nodeID string) (*backends.Node, error) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	info, ok := n.nodes[nodeID]
	if !ok {
		return nil, fmt.Errorf("node %q: %w", nodeID, ErrNodeNotFound)
	}
	info.IPs = slices.Clone(info.IPs)
	return &info, nil
}
