package ontap

import (
	"context"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/rest"
)

var (
	_ backends.Fencer = (*nasDriver)(nil)
	_ backends.Fencer = (*nasEconomyDriver)(nil)
)

// Fence cuts a node off an ontap-nas volume: the FlexVol is read again
// from ONTAP for the policy it has now, the node's rules are removed from
// it when it is one publish manages, and the policy in force is read
// again and must admit none of the node's addresses
// (docs/design/fencing.md §3.3).
func (n *nasDriver) Fence(ctx context.Context, vol *backends.Volume, nodeName string, node *backends.Node) ([]string, error) {
	h := handleOf(vol)
	if h == nil || h.vol == nil {
		return nil, nil
	}
	return n.fence(ctx, nodeName, node, func(ctx context.Context) (*exportTarget, error) {
		v, err := n.client.GetVolume(ctx, h.vol.Name)
		if rest.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, n.failure(err, "reading volume %s", vol.ID)
		}
		return n.flexVolTarget(&backends.Volume{ID: vol.ID, Handle: &handle{vol: v}}), nil
	})
}

// Fence cuts a node off an ontap-nas-economy qtree, as nasDriver.Fence
// does a FlexVol: the qtree's own policy decides its access. The pool's
// backend policy, shared by every qtree of the pool, keeps the node.
func (n *nasEconomyDriver) Fence(ctx context.Context, vol *backends.Volume, nodeName string, node *backends.Node) ([]string, error) {
	h := qtreeHandleOf(vol)
	if h == nil {
		return nil, nil
	}
	return n.fence(ctx, nodeName, node, func(ctx context.Context) (*exportTarget, error) {
		qs, err := n.client.ListQtrees(ctx, h.qtree.Volume, h.qtree.Name)
		if err != nil {
			return nil, n.failure(err, "reading qtree %s/%s", h.qtree.Volume, h.qtree.Name)
		}
		if len(qs) == 0 {
			return nil, nil
		}
		return n.qtreeTarget(&qs[0]), nil
	})
}

// fence removes the node's rules from the policy read returns the target
// with, then confirms with a second read. read returns nil when the
// target is gone: nothing reaches it.
func (n *nasDriver) fence(ctx context.Context, nodeName string, node *backends.Node, read func(context.Context) (*exportTarget, error)) ([]string, error) {
	if nodeName == "" {
		return nil, backends.Errorf(backends.ErrInvalid, "fencing needs the node's name")
	}
	if node == nil || len(nodeAddrs(node)) == 0 {
		// An export rule names addresses, not nodes: without them no
		// rule can be ruled out.
		return nil, backends.Errorf(backends.ErrNotFenced,
			"node %s: its addresses are unknown (its node plugin has not reported), so its export rules cannot be identified", nodeName)
	}
	addrs := nodeAddrs(node)
	t, err := read(ctx)
	if err != nil || t == nil {
		return nil, err
	}
	var removed []string
	if t.policy == t.own || legacyBackendPolicyRE.MatchString(t.policy) {
		if removed, err = n.removeNodeRules(ctx, t.policy, addrs); err != nil {
			return nil, err
		}
		if len(removed) > 0 && t.policy == t.own {
			// Back on the empty policy once no node is left, as after an
			// unpublish; the node's rules are gone already.
			if err := n.revokeAccess(ctx, t, nodeName, node); err != nil {
				return nil, err
			}
		}
	}
	if t, err = read(ctx); err != nil || t == nil {
		return removed, err
	}
	return removed, n.confirmExportFenced(ctx, t, nodeName, addrs)
}

// removeNodeRules deletes the rules of policy name whose every client is
// one of the node's addresses. A rule naming other clients too stays:
// deleting it would cut them off; the confirmation then fails.
func (n *nasDriver) removeNodeRules(ctx context.Context, name string, addrs []netip.Addr) ([]string, error) {
	p, rules, err := n.client.GetExportPolicyRules(ctx, name)
	if rest.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, n.failure(err, "reading export policy %s", name)
	}
	var removed []string
	for _, r := range rules {
		if len(r.Clients) == 0 || !allNodeAddrs(r.Clients, addrs) {
			continue
		}
		if err := n.client.DeleteExportRule(ctx, p.ID, r.Index); err != nil && !rest.IsNotFound(err) {
			return removed, n.failure(err, "removing rule %d of export policy %s", r.Index, name)
		}
		removed = append(removed, "export policy "+name+" rule "+strconv.FormatInt(r.Index, 10)+" ("+strings.Join(r.Clients, ",")+")")
	}
	return removed, nil
}

// confirmExportFenced reads the rules of the policy in force and fails
// with ErrNotFenced while one may admit an address of the node. A client
// that is neither an address nor a prefix (a host name, a netgroup, a
// domain) cannot be ruled out.
func (n *nasDriver) confirmExportFenced(ctx context.Context, t *exportTarget, nodeName string, addrs []netip.Addr) error {
	_, rules, err := n.client.GetExportPolicyRules(ctx, t.policy)
	if err != nil {
		// NotFound too: a policy replaced meanwhile; the retry reads again.
		return backends.Errorf(backends.ErrNotFenced, "confirming the fence of node %s from %s: reading export policy %s: %w", nodeName, t.what, t.policy, err)
	}
	var left []string
	for _, r := range rules {
		for _, c := range r.Clients {
			if mayAdmit(c, addrs) {
				left = append(left, "rule "+strconv.FormatInt(r.Index, 10)+" admits "+c)
			}
		}
	}
	if len(left) > 0 {
		return backends.Errorf(backends.ErrNotFenced, "node %s still reaches %s through export policy %s: %s",
			nodeName, t.what, t.policy, strings.Join(left, "; "))
	}
	return nil
}

// nodeAddrs are all the node's addresses, whatever autoExportCIDRs says:
// a rule an admin or an older configuration made may name any of them.
func nodeAddrs(node *backends.Node) []netip.Addr {
	var out []netip.Addr
	for _, ip := range node.IPs {
		if a, err := netip.ParseAddr(strings.TrimSpace(ip)); err == nil {
			out = append(out, a.Unmap())
		}
	}
	return out
}

func allNodeAddrs(clients []string, addrs []netip.Addr) bool {
	for _, c := range clients {
		a, err := netip.ParseAddr(strings.TrimSpace(c))
		if err != nil || !slices.Contains(addrs, a.Unmap()) {
			return false
		}
	}
	return true
}

// mayAdmit reports whether an export rule client may match one of addrs:
// a match by name cannot be ruled out.
func mayAdmit(client string, addrs []netip.Addr) bool {
	match, known := clientMatch(client, addrs)
	return match || !known
}
