package controller

import (
	"context"
	"slices"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/ontap-csi/ontap-csi/backends"
)

// NodeLister is a NodeRegistry that can list every node it knows.
// ListVolumes needs it to tell which nodes ONTAP's export rules admit: a
// rule names addresses, and only the node records map them to node IDs.
type NodeLister interface {
	ListNodes(ctx context.Context) ([]backends.Node, error)
}

// ListVolumes pages through the volumes of all backends in ID order, each
// with the nodes it is published to as ONTAP's state says (export rules,
// LUN maps), not as any record of ours says: external-attacher publishes a
// volume again only where ListVolumes says it is not published, and
// Publish repairs the access (docs/design/ontap-rest.md §9).
func (s *Service) ListVolumes(ctx context.Context, req *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
	return reply(s.listVolumes(ctx, req))
}

func (s *Service) listVolumes(ctx context.Context, req *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
	if req.GetMaxEntries() < 0 {
		return nil, invalidArg("max_entries must not be negative")
	}
	start, ok := parsePageToken(req.GetStartingToken())
	if !ok {
		return nil, abortedToken(req.GetStartingToken())
	}
	vols, err := s.allVolumes(ctx)
	if err != nil {
		return nil, err
	}
	entries, next := page(vols, func(f found) string { return f.vol.ID }, start, int(req.GetMaxEntries()))
	published, err := s.publishedNodes(ctx, entries)
	if err != nil {
		return nil, err
	}
	resp := &csi.ListVolumesResponse{NextToken: next}
	for _, f := range entries {
		resp.Entries = append(resp.Entries, &csi.ListVolumesResponse_Entry{
			Volume: csiVolume(f.vol),
			Status: &csi.ListVolumesResponse_VolumeStatus{PublishedNodeIds: published[f.vol.ID]},
		})
	}
	return resp, nil
}

// publishedNodes asks each backend of a page once, about that page's
// volumes only, so that a page costs a fixed number of ONTAP requests per
// backend. The node IDs are the node records' names: the node_id that
// ControllerPublishVolume gets, which external-attacher compares.
func (s *Service) publishedNodes(ctx context.Context, entries []found) (map[string][]string, error) {
	byBackend := map[backends.Backend][]*backends.Volume{}
	var order []backends.Backend
	for _, f := range entries {
		if _, ok := f.backend.(backends.PublicationLister); !ok {
			continue
		}
		if _, seen := byBackend[f.backend]; !seen {
			order = append(order, f.backend)
		}
		byBackend[f.backend] = append(byBackend[f.backend], f.vol)
	}
	out := map[string][]string{}
	if len(order) == 0 {
		return out, nil
	}
	nodes, err := s.listNodes(ctx)
	if err != nil {
		return nil, err
	}
	for _, b := range order {
		got, err := b.(backends.PublicationLister).PublishedNodes(ctx, byBackend[b], nodes)
		if err != nil {
			return nil, backends.Named(b.Name(), err)
		}
		for id, names := range got {
			out[id] = names
		}
	}
	return out, nil
}

// listNodes lists the registry's nodes. A registry that cannot list gives
// none: ListVolumes then reports no volume published, and the attacher
// publishes again, which repairs and changes nothing else.
func (s *Service) listNodes(ctx context.Context) ([]backends.Node, error) {
	l, ok := s.nodes.(NodeLister)
	if !ok {
		return nil, nil
	}
	nodes, err := l.ListNodes(ctx)
	if err != nil {
		return nil, backends.Errorf(backends.ErrUnavailable, "listing nodes: %w", err)
	}
	slices.SortFunc(nodes, func(a, b backends.Node) int { return strings.Compare(a.Name, b.Name) })
	return nodes, nil
}

// ListNodes implements NodeLister.
func (n *Nodes) ListNodes(context.Context) ([]backends.Node, error) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	out := make([]backends.Node, 0, len(n.nodes))
	for _, info := range n.nodes {
		info.IPs = slices.Clone(info.IPs)
		out = append(out, info)
	}
	return out, nil
}
