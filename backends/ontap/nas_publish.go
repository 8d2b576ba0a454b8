package ontap

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/rest"
)

// Publish gives the node NFS access and returns Trident's publish_context.
//
// With autoExportPolicy each volume has its own policy, named after the
// FlexVol, holding one rule per published node whose clients are the
// node's addresses within autoExportCIDRs. The rule is reconciled on every
// publish: a rule that drifted (other clients, other access) or vanished is
// replaced, so access lost on ONTAP is repaired by the next attach (Trident
// #965, #1181). A volume still on Trident's per-backend policy keeps it, and
// the node's rule is ensured there. A policy chosen by the admin (static,
// or the StorageClass's exportPolicy) is left alone.
func (n *nasDriver) Publish(ctx context.Context, vol *backends.Volume, req *backends.PublishRequest) (map[string]string, error) {
	var pc map[string]string
	err := n.onVolume(ctx, vol, true, n.VolumeAt, func(vol *backends.Volume) (err error) {
		pc, err = n.publish(ctx, vol, req)
		return err
	})
	return pc, err
}

func (n *nasDriver) publish(ctx context.Context, vol *backends.Volume, req *backends.PublishRequest) (map[string]string, error) {
	h := handleOf(vol)
	v := h.vol
	if v.JunctionPath == "" {
		path := "/" + v.Name
		if err := n.client.ModifyVolume(ctx, v.UUID, rest.VolumeModify{JunctionPath: &path}); err != nil {
			return nil, n.failure(err, "mounting volume %s at %s", vol.ID, path)
		}
		v.JunctionPath = path
	}
	if n.cfg.AutoExportPolicy {
		if err := n.grantAccess(ctx, n.flexVolTarget(vol), &req.Node); err != nil {
			return nil, err
		}
	}
	return n.publishContext(v.JunctionPath, req), nil
}

// publishContext is Trident's publish_context of an NFS volume at path.
func (n *nasDriver) publishContext(path string, req *backends.PublishRequest) map[string]string {
	pc := map[string]string{
		"protocol":    string(backends.ProtocolFile),
		"nfsServerIp": n.nfsServer,
		"nfsPath":     path,
	}
	opts := n.cfg.NFSMountOptions
	if len(req.MountOptions) > 0 {
		opts = strings.Join(req.MountOptions, ",")
	}
	if opts != "" {
		pc["mountOptions"] = opts
	}
	return pc
}

// exportTarget is what an export policy applies to: an ontap-nas FlexVol,
// or an ontap-nas-economy qtree or pool FlexVol.
type exportTarget struct {
	what   string // for messages, e.g. "volume pvc-1"
	policy string // the policy it has now
	// own is the policy publish gives it when it has the empty one: a
	// FlexVol's and a qtree's are named after it (Trident), a pool's is the
	// backend's.
	own string
	set func(ctx context.Context, policy string) error
}

// flexVolTarget is the export target of an ontap-nas volume.
func (n *nasDriver) flexVolTarget(vol *backends.Volume) *exportTarget {
	v := handleOf(vol).vol
	return &exportTarget{
		what: "volume " + vol.ID, policy: v.ExportPolicy, own: v.Name,
		set: func(ctx context.Context, policy string) error {
			if err := n.client.ModifyVolume(ctx, v.UUID, rest.VolumeModify{ExportPolicy: &policy}); err != nil {
				return err
			}
			v.ExportPolicy = policy
			return nil
		},
	}
}

func (n *nasDriver) grantAccess(ctx context.Context, t *exportTarget, node *backends.Node) error {
	empty := emptyPolicyName(n.cfg.StoragePrefix)
	var policyName string
	switch {
	case t.policy == t.own || t.policy == empty:
		policyName = t.own
	case legacyBackendPolicyRE.MatchString(t.policy):
		policyName = t.policy
	default:
		return nil
	}
	clients := n.nodeClients(node)
	if len(clients) == 0 {
		return backends.Errorf(backends.ErrInvalid, "node %s has no address within autoExportCIDRs %v (addresses %v)",
			node.Name, n.cfg.AutoExportCIDRs, node.IPs)
	}
	rule := rest.ExportRule{Clients: clients}
	if t.policy == empty {
		// First publish: the target's own policy is normally absent, so
		// create it, with its rule inline (docs/design/ontap-rest.md §3.7), without reading first.
		p, err := n.client.CreateExportPolicy(ctx, policyName, rule)
		if err == nil {
			err = n.applyPolicy(ctx, t, policyName)
			if errors.Is(err, backends.ErrNotFound) {
				// The target is gone (a remembered volume deleted by hand,
				// docs/design/ontap-rest.md §10.1): the new policy would
				// stay behind. Best effort: it is empty of volumes.
				_ = n.client.DeleteExportPolicy(ctx, p.ID)
			}
			return err
		}
		if !rest.IsAlreadyExists(err) {
			return n.failure(err, "creating export policy %s", policyName)
		}
	}
	policy, rules, created, err := n.policyWithRules(ctx, policyName, rule)
	if err != nil {
		return err
	}
	if !created {
		if err := n.reconcileRule(ctx, policy, rules, node.Name, clients); err != nil {
			return err
		}
	}
	return n.applyPolicy(ctx, t, policyName)
}

// policyWithRules returns the export policy called name with its rules, in
// one read; one that is absent is created holding rules, in one request
// (docs/design/ontap-rest.md §3.7): created is true, and has is nil.
func (n *nasDriver) policyWithRules(ctx context.Context, name string, rules ...rest.ExportRule) (p *rest.ExportPolicy, has []rest.ExportRule, created bool, err error) {
	p, has, err = n.client.GetExportPolicyRules(ctx, name)
	if rest.IsNotFound(err) {
		if p, err = n.client.CreateExportPolicy(ctx, name, rules...); err == nil {
			return p, nil, true, nil
		}
		if rest.IsAlreadyExists(err) { // made concurrently
			p, has, err = n.client.GetExportPolicyRules(ctx, name)
		}
	}
	if err != nil {
		return nil, nil, false, n.failure(err, "reading export policy %s", name)
	}
	return p, has, false, nil
}

// applyPolicy puts the target on the export policy.
func (n *nasDriver) applyPolicy(ctx context.Context, t *exportTarget, policyName string) error {
	if t.policy != policyName {
		if err := t.set(ctx, policyName); err != nil {
			return n.failure(err, "applying export policy %s to %s", policyName, t.what)
		}
		t.policy = policyName
	}
	return nil
}

// nodeClients are the node's addresses admitted by autoExportCIDRs.
func (n *nasDriver) nodeClients(node *backends.Node) []string {
	var out []string
	for _, ip := range node.IPs {
		addr, err := netip.ParseAddr(strings.TrimSpace(ip))
		if err != nil {
			continue
		}
		addr = addr.Unmap()
		for _, cidr := range n.cfg.AutoExportCIDRs {
			if cidr.Contains(addr) {
				out = append(out, addr.String())
				break
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// reconcileRule makes the policy, which holds rules, hold exactly one rule
// for the node: clients = its addresses, NFS, read-write, root squash off
// (Trident's rule).
func (n *nasDriver) reconcileRule(ctx context.Context, policy *rest.ExportPolicy, rules []rest.ExportRule, node string, clients []string) error {
	found, drifted := false, false
	for _, r := range rules {
		if !overlaps(r.Clients, clients) {
			continue
		}
		// clients is sorted (nodeClients).
		if !found && slices.Equal(slices.Sorted(slices.Values(r.Clients)), clients) && tridentRule(r) {
			found = true
			continue
		}
		logrus.WithContext(ctx).WithFields(logrus.Fields{"policy": policy.Name, "node": node, "clients": r.Clients, "index": r.Index}).
			Warn("replacing an export rule that drifted")
		drifted = true
		if err := n.client.DeleteExportRule(ctx, policy.ID, r.Index); err != nil && !rest.IsNotFound(err) {
			return n.failure(err, "removing rule %d of export policy %s", r.Index, policy.Name)
		}
	}
	if found {
		return nil
	}
	if _, err := n.client.AddExportRule(ctx, policy.ID, rest.ExportRule{Clients: clients}); err != nil && !rest.IsAlreadyExists(err) {
		return n.failure(err, "adding a rule for node %s to export policy %s", node, policy.Name)
	}
	if drifted {
		driftedRules.WithLabelValues(n.Name()).Inc()
	}
	return nil
}

// tridentRule reports whether a rule grants what Trident's rules grant.
func tridentRule(r rest.ExportRule) bool {
	is := func(v []string, want ...string) bool {
		return len(v) == 1 && slices.Contains(want, v[0])
	}
	return is(r.Protocols, "nfs", "any") && is(r.RORule, "any") && is(r.RWRule, "any") && is(r.Superuser, "any")
}

func overlaps(a, b []string) bool {
	for _, x := range a {
		if slices.Contains(b, x) {
			return true
		}
	}
	return false
}

// Unpublish removes the node's rule from the volume's own policy. When no
// node is left, the volume goes back to the empty policy and its policy is
// deleted. A node that is no longer registered has unknown addresses: its
// rule stays until the volume's last unpublish or its deletion. Trident's
// per-backend policy is shared by all volumes, so it is never trimmed here.
func (n *nasDriver) Unpublish(ctx context.Context, vol *backends.Volume, nodeName string, node *backends.Node) error {
	if !n.cfg.AutoExportPolicy {
		return nil
	}
	return n.onGone(ctx, vol, true, n.VolumeAt, func(vol *backends.Volume) error {
		return n.revokeAccess(ctx, n.flexVolTarget(vol), nodeName, node)
	})
}

// revokeAccess removes a node's rule from the target's own policy, and
// puts the target back on the empty policy once no rule is left.
func (n *nasDriver) revokeAccess(ctx context.Context, t *exportTarget, nodeName string, node *backends.Node) error {
	if t.policy != t.own {
		return nil
	}
	policy, rules, err := n.client.GetExportPolicyRules(ctx, t.own)
	if rest.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return n.failure(err, "reading export policy %s", t.own)
	}
	var clients []string
	switch {
	case node != nil:
		clients = n.nodeClients(node)
	case nodeName != "":
		logrus.WithContext(ctx).WithFields(logrus.Fields{"target": t.what, "node": nodeName}).
			Warn("node is not registered: its export rule cannot be identified and stays until the volume's last unpublish")
		return nil
	}
	var revoke []rest.ExportRule
	for _, r := range rules {
		if nodeName == "" || overlaps(r.Clients, clients) {
			revoke = append(revoke, r)
		}
	}
	deleteRules := func() error {
		for _, r := range revoke {
			if err := n.client.DeleteExportRule(ctx, policy.ID, r.Index); err != nil && !rest.IsNotFound(err) {
				return n.failure(err, "removing rule %d of export policy %s", r.Index, policy.Name)
			}
		}
		return nil
	}
	if len(revoke) < len(rules) {
		return deleteRules()
	}
	// No rule stays: the target goes back to the empty policy, which
	// revokes the access at once, and the policy is deleted with its
	// rules (ONTAP deletes a policy's rules with it, docs/design/ontap-rest.md
	// §3.7), so the rules need no request of their own (§10.3).
	if err := n.ensureEmptyPolicy(ctx); err != nil {
		return err
	}
	if err := n.applyPolicy(ctx, t, emptyPolicyName(n.cfg.StoragePrefix)); err != nil {
		return err
	}
	err = n.client.DeleteExportPolicy(ctx, policy.ID)
	switch {
	case err == nil || rest.IsNotFound(err):
		return nil
	case rest.IsInUse(err):
		// Another volume (or qtree) uses the policy, someone applied it by
		// hand; it stays until this volume is deleted, without the rules
		// of the node.
		return deleteRules()
	}
	return n.failure(err, "deleting export policy %s", policy.Name)
}

func (n *nasDriver) ensureEmptyPolicy(ctx context.Context) error {
	n.emptyPolicyMu.Lock()
	defer n.emptyPolicyMu.Unlock()
	if n.emptyPolicyOK {
		return nil
	}
	name := emptyPolicyName(n.cfg.StoragePrefix)
	if _, err := n.ensurePolicy(ctx, name); err != nil {
		return err
	}
	n.emptyPolicyOK = true
	return nil
}

// ensurePolicy returns the export policy called name, creating it empty.
func (n *nasDriver) ensurePolicy(ctx context.Context, name string) (*rest.ExportPolicy, error) {
	p, err := n.client.GetExportPolicy(ctx, name)
	if err == nil {
		return p, nil
	}
	if !rest.IsNotFound(err) {
		return nil, n.failure(err, "reading export policy %s", name)
	}
	p, err = n.client.CreateExportPolicy(ctx, name)
	if rest.IsAlreadyExists(err) { // made concurrently
		p, err = n.client.GetExportPolicy(ctx, name)
	}
	if err != nil {
		return nil, n.failure(err, "creating export policy %s", name)
	}
	return p, nil
}

func (n *nasDriver) dropOwnPolicy(ctx context.Context, t *exportTarget) error {
	p, err := n.client.GetExportPolicy(ctx, t.own)
	if rest.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return n.failure(err, "reading export policy %s", t.own)
	}
	if t.policy == p.Name {
		if err := n.ensureEmptyPolicy(ctx); err != nil {
			return err
		}
		if err := n.applyPolicy(ctx, t, emptyPolicyName(n.cfg.StoragePrefix)); err != nil {
			return err
		}
	}
	if err := n.client.DeleteExportPolicy(ctx, p.ID); err != nil && !rest.IsNotFound(err) {
		return n.failure(err, "deleting export policy %s", p.Name)
	}
	return nil
}
