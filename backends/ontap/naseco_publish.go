package ontap

import (
	"context"
	"net/netip"
	"path"
	"slices"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/rest"
)

// Publish gives a node NFS access to a qtree and returns Trident's
// publish_context: nfsPath is the pool's junction and the qtree
// ("/<pool>/<qtree>", Trident's ConstructOntapNASQTreeVolumePath).
//
// With autoExportPolicy, as Trident's publishQtreeShare does, the qtree
// gets its own policy named after it with the node's rule (a qtree still
// on the backend's policy of older Tridents keeps it, with the node's rule
// added), and the pool FlexVol a backend policy holding every node that
// mounts from it, without which an NFS client cannot reach the qtree
// below it (docs/design/economy.md §1.3).
func (n *nasEconomyDriver) Publish(ctx context.Context, vol *backends.Volume, req *backends.PublishRequest) (map[string]string, error) {
	q := &qtreeHandleOf(vol).qtree
	pool, err := n.client.GetVolume(ctx, q.Volume)
	if err != nil {
		return nil, n.failure(err, "reading pool FlexVol %s of volume %s", q.Volume, vol.ID)
	}
	if pool.JunctionPath == "" {
		jp := "/" + pool.Name
		if err := n.client.ModifyVolume(ctx, pool.UUID, rest.VolumeModify{JunctionPath: &jp}); err != nil {
			return nil, n.failure(err, "mounting pool FlexVol %s at %s", pool.Name, jp)
		}
		pool.JunctionPath = jp
	}
	if n.cfg.AutoExportPolicy {
		if err := n.grantAccess(ctx, n.qtreeTarget(q), &req.Node); err != nil {
			return nil, err
		}
		if err := n.grantPoolAccess(ctx, pool, &req.Node); err != nil {
			return nil, err
		}
	}
	return n.publishContext(path.Join(pool.JunctionPath, q.Name), req), nil
}

// Unpublish removes the node's rule from the qtree's own policy; the
// qtree goes back to the empty policy once no node is left. The pool's
// backend policy keeps the node: other qtrees of any pool may use it.
func (n *nasEconomyDriver) Unpublish(ctx context.Context, vol *backends.Volume, nodeName string, node *backends.Node) error {
	if !n.cfg.AutoExportPolicy {
		return nil
	}
	return n.revokeAccess(ctx, n.qtreeTarget(&qtreeHandleOf(vol).qtree), nodeName, node)
}

// qtreeTarget is the export target of a qtree; its own policy is named
// after it, as Trident's.
func (n *nasEconomyDriver) qtreeTarget(q *rest.Qtree) *exportTarget {
	return &exportTarget{
		what: "qtree " + q.Volume + "/" + q.Name, policy: q.ExportPolicy, own: q.Name,
		set: func(ctx context.Context, policy string) error {
			if err := n.client.ModifyQtree(ctx, q.VolumeUUID, q.ID, rest.QtreeModify{ExportPolicy: &policy}); err != nil {
				return err
			}
			q.ExportPolicy = policy
			return nil
		},
	}
}

// backendPolicy is the export policy of the pools published to: Trident's
// per-backend name, "trident-<backendUUID>".
func (n *nasEconomyDriver) backendPolicy() string { return "trident-" + n.backendUUID }

// grantPoolAccess makes the pool's policy admit the node. A pool on the
// empty policy moves to the backend policy; one on a backend policy
// (ours, or one Trident left) keeps it. Rules are only added, one per
// address as Trident adds them, never replaced: the policy is shared by
// every pool and every node mounting from them.
func (n *nasEconomyDriver) grantPoolAccess(ctx context.Context, pool *rest.Volume, node *backends.Node) error {
	name := pool.ExportPolicy
	switch {
	case name == emptyPolicyName(n.cfg.StoragePrefix):
		name = n.backendPolicy()
	case !legacyBackendPolicyRE.MatchString(name):
		return nil // a policy the admin chose
	}
	clients := n.nodeClients(node)
	if len(clients) == 0 {
		return backends.Errorf(backends.ErrInvalid, "node %s has no address within autoExportCIDRs %v (addresses %v)",
			node.Name, n.cfg.AutoExportCIDRs, node.IPs)
	}
	want := make([]rest.ExportRule, 0, len(clients))
	for _, c := range clients {
		want = append(want, rest.ExportRule{Clients: []string{c}})
	}
	policy, rules, created, err := n.policyWithRules(ctx, name, want...)
	if err != nil {
		return err
	}
	for _, c := range clients {
		if created || admitted(rules, c) {
			continue
		}
		if _, err := n.client.AddExportRule(ctx, policy.ID, rest.ExportRule{Clients: []string{c}}); err != nil && !rest.IsAlreadyExists(err) {
			return n.failure(err, "adding a rule for node %s to export policy %s", node.Name, name)
		}
	}
	if pool.ExportPolicy != name {
		if err := n.client.ModifyVolume(ctx, pool.UUID, rest.VolumeModify{ExportPolicy: &name}); err != nil {
			return n.failure(err, "applying export policy %s to pool FlexVol %s", name, pool.Name)
		}
		pool.ExportPolicy = name
	}
	return nil
}

// admitted reports whether a rule granting Trident's access names the
// address among its clients.
func admitted(rules []rest.ExportRule, addr string) bool {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return false
	}
	for _, r := range rules {
		if !tridentRule(r) {
			continue
		}
		if slices.ContainsFunc(r.Clients, func(c string) bool {
			if p, err := netip.ParsePrefix(c); err == nil {
				return p.Contains(a)
			}
			ca, err := netip.ParseAddr(c)
			return err == nil && ca == a
		}) {
			return true
		}
	}
	return false
}
