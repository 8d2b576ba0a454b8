package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// NodeInfo is what the controller needs to know of a node to give it access
// to a volume.
type NodeInfo struct {
	// Name is the node ID: the Kubernetes node name (--csi_node_name).
	Name string
	// IQN is the node's iSCSI initiator name, "" if it has none.
	IQN string
	// IPs are the node's addresses, for NFS export rules.
	IPs []string
}

// NodeRegistry tells the controller about nodes. In allInOne the local node
// registers in-process (Nodes); elsewhere the information comes from the
// node plugins through Trident's REST API or TridentNode objects.
type NodeRegistry interface {
	// Node returns the node with the given ID, or an error wrapping
	// ErrNodeNotFound.
	Node(ctx context.Context, nodeID string) (*NodeInfo, error)
}

// ErrNodeNotFound means the registry does not know the node.
var ErrNodeNotFound = errors.New("node not found")

// Nodes is an in-process NodeRegistry.
type Nodes struct {
	mu    sync.RWMutex
	nodes map[string]NodeInfo
}

// NewNodes returns an empty registry.
func NewNodes() *Nodes { return &Nodes{nodes: map[string]NodeInfo{}} }

// Set adds or replaces a node.
func (n *Nodes) Set(info NodeInfo) {
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

// Node implements NodeRegistry.
func (n *Nodes) Node(_ context.Context, nodeID string) (*NodeInfo, error) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	info, ok := n.nodes[nodeID]
	if !ok {
		return nil, fmt.Errorf("node %q: %w", nodeID, ErrNodeNotFound)
	}
	info.IPs = slices.Clone(info.IPs)
	return &info, nil
}
