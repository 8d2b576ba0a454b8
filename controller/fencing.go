package controller

import (
	"context"
	"errors"

	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/backends"
)

// OutOfServiceTaint is the taint an admin (or a cloud provider) puts on a
// node that is shut down for good, for Kubernetes' non-graceful node
// shutdown: its pods are deleted and their volumes force-detached
// (docs/design/fencing.md §1.1).
const OutOfServiceTaint = "node.kubernetes.io/out-of-service"

// NodeState is what the controller needs of a Kubernetes Node to decide
// whether a detach from it must fence it.
type NodeState struct {
	// OutOfService: the Node carries OutOfServiceTaint (any effect: the
	// attach-detach controller checks the key only).
	OutOfService bool
	// Ready: the Node's Ready condition is True.
	Ready bool
}

// NodeStates reads Node objects. Every call reads the API server: a
// taint or a Ready condition from a cache could be the one that is no
// longer true.
type NodeStates interface {
	// NodeState returns the state of Node nodeID, or an error wrapping
	// ErrNodeNotFound when there is no such Node.
	NodeState(ctx context.Context, nodeID string) (NodeState, error)
}

// fenceDecision says whether a ControllerUnpublishVolume must fence the
// node, and why (for the log).
type fenceDecision struct {
	fence  bool
	reason string
}

// decideFence decides from the Node's state, or the error reading it,
// and Trident's --enable_force_detach (docs/design/fencing.md §2):
//   - the out-of-service taint fences, whatever the flag;
//   - with the flag, a Node that is not Ready, or that no longer exists,
//     is fenced;
//   - a Node whose state could not be read is neither fenced nor
//     detached: Unavailable, and the CO retries.
func decideFence(nodeID string, st NodeState, err error, forceDetach bool) (fenceDecision, error) {
	switch {
	case errors.Is(err, ErrNodeNotFound):
		if forceDetach {
			return fenceDecision{true, "the Node no longer exists and --enable_force_detach is set"}, nil
		}
		return fenceDecision{}, nil
	case err != nil:
		return fenceDecision{}, backends.Errorf(backends.ErrUnavailable,
			"cannot tell whether node %s must be fenced before the detach: %w", nodeID, err)
	case st.OutOfService:
		return fenceDecision{true, "the Node carries the " + OutOfServiceTaint + " taint"}, nil
	case forceDetach && !st.Ready:
		return fenceDecision{true, "the Node is not Ready and --enable_force_detach is set"}, nil
	}
	return fenceDecision{}, nil
}

// mustFence reads the Node and decides. Without NodeStates (no
// Kubernetes API: allInOne, or outside a cluster) nothing is fenced, and
// neither is a detach from every node (empty node ID).
func (s *Service) mustFence(ctx context.Context, nodeID string) (fenceDecision, error) {
	if s.nodeStates == nil || nodeID == "" {
		return fenceDecision{}, nil
	}
	st, err := s.nodeStates.NodeState(ctx, nodeID)
	return decideFence(nodeID, st, err, s.forceDetach)
}

// fence cuts the node off the volume on its backend and returns only once
// the backend confirmed it with a fresh read (backends.Fencer): only then
// may the CO attach the volume elsewhere. A backend that cannot fence
// fails the detach, so that the volume is not attached twice.
func (s *Service) fence(ctx context.Context, f *found, nodeID string, d fenceDecision) error {
	log := logrus.WithContext(ctx).WithFields(logrus.Fields{"volume": f.vol.ID, "node": nodeID, "backend": f.backend.Name(), "reason": d.reason})
	fencer, ok := f.backend.(backends.Fencer)
	if !ok {
		return backends.Errorf(backends.ErrNotFenced, "backend %s cannot fence node %s (%s)", f.backend.Name(), nodeID, d.reason)
	}
	node, err := s.node(ctx, nodeID)
	switch {
	case errors.Is(err, ErrNodeNotFound):
		// The backend fences by name what it can, and refuses what it
		// cannot identify without the node's IQN or addresses.
		log.WithError(err).Warn("node is not registered: fencing by its name only")
		node = nil
	case err != nil:
		return err
	}
	log.Info("fencing node before the detach")
	removed, err := fencer.Fence(ctx, f.vol, nodeID, node)
	if err != nil {
		log.WithError(err).WithField("removed", removed).Warn("node is not fenced: the detach fails and is retried")
		// Always Unavailable, whatever the backend's kind: external-attacher
		// takes NotFound from a detach for "already detached", which a
		// fence that did not hold must never say.
		return backends.Named(f.backend.Name(), backends.Errorf(backends.ErrNotFenced, "fencing node %s (%s): %w", nodeID, d.reason, err))
	}
	log.WithField("removed", removed).Info("node fenced: ONTAP confirms it has no access to the volume")
	return nil
}
