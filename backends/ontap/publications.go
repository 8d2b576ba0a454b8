package ontap

import (
	"context"
	"net/netip"
	"slices"
	"strings"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/rest"
)

// Published nodes are read from ONTAP's state, never from a record of
// ours: what external-attacher compares with its VolumeAttachments must be
// what ONTAP grants, so that a rule or map removed on ONTAP makes it
// publish again, and Publish repairs it (docs/design/ontap-rest.md §9).
// Each kind is listed once per call, whatever the number of volumes.

var (
	_ backends.PublicationLister = (*nasDriver)(nil)
	_ backends.PublicationLister = (*nasEconomyDriver)(nil)
	_ backends.PublicationLister = (*sanDriver)(nil)
)

// PublishedNodes implements backends.PublicationLister for ontap-nas: a
// node is published when a rule of the FlexVol's export policy admits one
// of its addresses.
func (n *nasDriver) PublishedNodes(ctx context.Context, vols []*backends.Volume, nodes []backends.Node) (map[string][]string, error) {
	if len(vols) == 0 {
		return map[string][]string{}, nil
	}
	policies, err := n.policyRules(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]string, len(vols))
	for _, vol := range vols {
		h := handleOf(vol)
		if h == nil || h.vol == nil {
			continue
		}
		out[vol.ID] = admittedNodes(nodes, policies[h.vol.ExportPolicy])
	}
	return out, nil
}

// PublishedNodes implements backends.PublicationLister for
// ontap-nas-economy: a node reaches a qtree only when both the qtree's
// policy and its pool FlexVol's admit it (docs/design/economy.md §1.3).
func (n *nasEconomyDriver) PublishedNodes(ctx context.Context, vols []*backends.Volume, nodes []backends.Node) (map[string][]string, error) {
	if len(vols) == 0 {
		return map[string][]string{}, nil
	}
	policies, err := n.policyRules(ctx)
	if err != nil {
		return nil, err
	}
	pools, err := n.client.ListVolumes(ctx, n.eco.prefix)
	if err != nil {
		return nil, n.failure(err, "listing pool FlexVols")
	}
	poolPolicy := make(map[string]string, len(pools))
	for _, p := range pools {
		poolPolicy[p.Name] = p.ExportPolicy
	}
	out := make(map[string][]string, len(vols))
	for _, vol := range vols {
		h := qtreeHandleOf(vol)
		if h == nil {
			continue
		}
		inQtree := admittedNodes(nodes, policies[h.qtree.ExportPolicy])
		inPool := admittedNodes(nodes, policies[poolPolicy[h.qtree.Volume]])
		out[vol.ID] = slices.DeleteFunc(inQtree, func(name string) bool { return !slices.Contains(inPool, name) })
	}
	return out, nil
}

// policyRules reads every export policy of the SVM with its rules, by name.
func (n *nasDriver) policyRules(ctx context.Context) (map[string][]rest.ExportRule, error) {
	if err := n.ready(ctx); err != nil {
		return nil, err
	}
	ps, err := n.client.ListExportPoliciesWithRules(ctx)
	if err != nil {
		return nil, n.failure(err, "listing export policies")
	}
	out := make(map[string][]rest.ExportRule, len(ps))
	for _, p := range ps {
		out[p.Name] = p.Rules
	}
	return out, nil
}

// admittedNodes returns the names of the nodes that one of rules admits, sorted.
func admittedNodes(nodes []backends.Node, rules []rest.ExportRule) []string {
	out := []string{}
	for i := range nodes {
		addrs := nodeAddrs(&nodes[i])
		if slices.ContainsFunc(rules, func(r rest.ExportRule) bool { return ruleAdmits(r, addrs) }) {
			out = append(out, nodes[i].Name)
		}
	}
	slices.Sort(out)
	return out
}

// ruleAdmits reports whether an export rule lets one of the addresses
// mount over NFS. A client match ONTAP resolves by name (host name,
// netgroup, domain) cannot be judged here and admits no one: the worst
// that follows is a publish that changes nothing.
func ruleAdmits(r rest.ExportRule, addrs []netip.Addr) bool {
	return grantsNFS(r) && slices.ContainsFunc(r.Clients, func(c string) bool {
		match, _ := clientMatch(c, addrs)
		return match
	})
}

// clientMatch reports whether an export rule's client match names one of
// addrs (an address or a prefix). known is false for a match ONTAP
// resolves by name (a host name, a netgroup, a domain), which cannot be
// judged here: published-node listing counts it out, fencing counts it in.
func clientMatch(client string, addrs []netip.Addr) (match, known bool) {
	client = strings.TrimSpace(client)
	if a, err := netip.ParseAddr(client); err == nil {
		return slices.Contains(addrs, a.Unmap()), true
	}
	if p, err := netip.ParsePrefix(client); err == nil {
		return slices.ContainsFunc(addrs, p.Contains), true
	}
	return false, false
}

// grantsNFS: the rule serves NFS and grants some access (its ro_rule or
// rw_rule is not only "never"). Empty lists are ONTAP's defaults, which
// grant.
func grantsNFS(r rest.ExportRule) bool {
	if len(r.Protocols) > 0 && !slices.ContainsFunc(r.Protocols, func(p string) bool {
		return p == "any" || strings.HasPrefix(p, "nfs")
	}) {
		return false
	}
	never := func(v []string) bool {
		return len(v) > 0 && !slices.ContainsFunc(v, func(s string) bool { return s != "never" })
	}
	return !never(r.RORule) || !never(r.RWRule)
}

// PublishedNodes implements backends.PublicationLister for ontap-san and
// ontap-san-economy: a node is published when the LUN is mapped to an
// igroup that holds the node's IQN. A node without a known IQN is
// published when the LUN is mapped to its per-node igroup (the naming rule
// of Publish, ours or Trident's).
func (s *sanDriver) PublishedNodes(ctx context.Context, vols []*backends.Volume, nodes []backends.Node) (map[string][]string, error) {
	if len(vols) == 0 {
		return map[string][]string{}, nil
	}
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	maps, err := s.client.ListLUNMaps(ctx, "", "")
	if err != nil {
		return nil, s.failure(err, "listing LUN maps")
	}
	igs, err := s.client.ListIgroups(ctx)
	if err != nil {
		return nil, s.failure(err, "listing igroups")
	}
	initiators := make(map[string][]string, len(igs))
	for _, ig := range igs {
		initiators[ig.Name] = ig.Initiators
	}
	mapsOf := map[string][]rest.LUNMap{} // LUN path → its maps
	for _, m := range maps {
		mapsOf[m.LUNPath] = append(mapsOf[m.LUNPath], m)
	}
	out := make(map[string][]string, len(vols))
	for _, vol := range vols {
		h := handleOf(vol)
		if h == nil || h.vol == nil {
			continue
		}
		path := lunPath(h.vol.Name)
		if h.lun != nil {
			path = h.lun.Path
		}
		names := []string{}
		for _, node := range nodes {
			i := slices.IndexFunc(mapsOf[path], func(m rest.LUNMap) bool {
				if node.IQN == "" {
					return isNodeIgroup(m.IgroupName, node.Name, s.installationID)
				}
				return slices.Contains(initiators[m.IgroupName], node.IQN)
			})
			if i >= 0 {
				names = append(names, node.Name)
				// The ID the node sees the LUN at, for a publish that
				// has to make the map again (docs/design/ontap-rest.md
				// §10.4): remembered at no cost, from this listing.
				m := mapsOf[path][i]
				s.lunIDs.put(m.LUNUUID, igroupName(node.Name, s.installationID), m.LUNID)
			}
		}
		slices.Sort(names)
		out[vol.ID] = names
	}
	return out, nil
}
