package ontapsim

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Cluster-scoped and discovery endpoints: cluster, nodes, aggregates, SVMs,
// network interfaces, snapshot policies, and the calls a Trident-style
// client makes that need no model (snapmirror lists, EMS).

var clusterResource = &resource{
	schema: newSchema(`name uuid version.full version.generation version.major version.minor
		san_optimized disaggregated location contact _links`),
	keys: []string{"name", "uuid"},
}

var nodeResource = &resource{
	schema: newSchema(`uuid name serial_number model state version.full version.generation version.major
		version.minor ha.enabled ha.partners.name ha.partners.uuid _links`),
	keys:    []string{"uuid", "name"},
	sortKey: "name",
}

var aggrResource = &resource{
	schema: newSchema(`uuid name node.name node.uuid state snaplock_type
		space.block_storage.size space.block_storage.available space.block_storage.used
		space.block_storage.used_percent space.footprint
		space.efficiency.logical_used space.efficiency.ratio space.efficiency.savings
		block_storage.primary.disk_type block_storage.primary.disk_class _links`),
	keys:    []string{"uuid", "name"},
	sortKey: "name",
}

var svmResource = &resource{
	schema: newSchema(`uuid name state subtype language aggregates.name aggregates.uuid
		aggregates.available_size aggregates.state aggregates.type aggregates.snaplock_type
		aggregates_delegated max_volumes nfs.enabled nfs.allowed iscsi.enabled iscsi.allowed
		fcp.enabled fcp.allowed nvme.enabled nvme.allowed
		ip_interfaces.name ip_interfaces.uuid ip_interfaces.ip.address ip_interfaces.services _links`),
	keys:    []string{"uuid", "name"},
	sortKey: "name",
}

var lifResource = &resource{
	schema: newSchema(`uuid name ip.address ip.netmask ip.family enabled state scope svm.name svm.uuid
		services service_policy.name location.node.name location.node.uuid location.home_node.name
		location.home_node.uuid location.port.name location.port.node.name location.home_port.name
		location.home_port.node.name location.is_home location.auto_revert location.failover
		ipspace.name vip _links`),
	keys:    []string{"uuid", "name"},
	sortKey: "name",
}

var snapPolicyResource = &resource{
	schema:  newSchema(`uuid name enabled comment scope svm.name svm.uuid _links`),
	keys:    []string{"uuid", "name"},
	sortKey: "name",
}

func (c *call) usage() *usage {
	if c.u == nil {
		c.u = c.s.newUsage()
	}
	return c.u
}

func (s *Simulator) versionParts() (g, m, n int) {
	fmt.Sscanf(s.m.Cluster.Version, "%d.%d.%d", &g, &m, &n)
	return
}

func (s *Simulator) getCluster(c *call) (*reply, *apiError) {
	g, mj, mn := s.versionParts()
	rec := map[string]any{
		"name": s.m.Cluster.Name,
		"uuid": s.m.Cluster.UUID,
		"version": map[string]any{
			"full":       fmt.Sprintf("NetApp Release %s: Simulated ONTAP (ontap-csi)", s.m.Cluster.Version),
			"generation": g, "major": mj, "minor": mn,
		},
		"_links": selfLink("/api/cluster"),
	}
	if s.cfg.versionAtLeast(9, 16, 1) {
		rec["san_optimized"] = false
		rec["disaggregated"] = false
	}
	return c.instance(clusterResource, rec)
}

func (s *Simulator) renderNode(n *nodeState) map[string]any {
	g, mj, mn := s.versionParts()
	rec := map[string]any{
		"uuid": n.UUID, "name": n.Name, "serial_number": n.Serial, "model": "SIMBOX", "state": "up",
		"version": map[string]any{"full": "NetApp Release " + s.m.Cluster.Version, "generation": g, "major": mj, "minor": mn},
		"ha":      map[string]any{"enabled": n.Partner != ""},
		"_links":  selfLink("/api/cluster/nodes/" + n.UUID),
	}
	if p := s.m.node(n.Partner); p != nil {
		rec["ha"].(map[string]any)["partners"] = []any{map[string]any{"name": p.Name, "uuid": p.UUID}}
	}
	return rec
}

func (s *Simulator) getNodes(c *call) (*reply, *apiError) {
	var recs []map[string]any
	for _, n := range s.m.Nodes {
		recs = append(recs, s.renderNode(n))
	}
	return c.list(nodeResource, recs)
}

func (s *Simulator) getNode(c *call) (*reply, *apiError) {
	n := s.m.node(c.params["uuid"])
	if n == nil {
		return nil, errNotFound(codeNotFound, "uuid", "entry doesn't exist")
	}
	return c.instance(nodeResource, s.renderNode(n))
}

func (s *Simulator) renderAggr(u *usage, a *aggrState) map[string]any {
	used := u.aggrUsed(a)
	avail := max(0, a.Size-used)
	pct := int64(0)
	if a.Size > 0 {
		pct = used * 100 / a.Size
	}
	rec := map[string]any{
		"uuid": a.UUID, "name": a.Name, "state": "online", "snaplock_type": "non_snaplock",
		"space": map[string]any{
			"block_storage": map[string]any{"size": a.Size, "available": avail, "used": used, "used_percent": pct},
			"footprint":     used,
			"efficiency":    map[string]any{"logical_used": used, "ratio": 1, "savings": 0},
		},
		"block_storage": map[string]any{"primary": map[string]any{"disk_type": a.DiskType, "disk_class": diskClass(a.DiskType)}},
		"_links":        selfLink("/api/storage/aggregates/" + a.UUID),
	}
	if n := s.m.node(a.Node); n != nil {
		rec["node"] = map[string]any{"name": n.Name, "uuid": n.UUID}
	}
	return rec
}

func diskClass(t string) string {
	switch t {
	case "ssd", "nvme_ssd", "ssd_cap", "ssd_zns":
		return "solid_state"
	case "vm_disk":
		return "virtual"
	}
	return "performance"
}

func (s *Simulator) getAggregates(c *call) (*reply, *apiError) {
	u := c.usage()
	var recs []map[string]any
	for _, a := range s.m.Aggregates {
		recs = append(recs, s.renderAggr(u, a))
	}
	return c.list(aggrResource, recs)
}

func (s *Simulator) getAggregate(c *call) (*reply, *apiError) {
	a := s.m.aggr(c.params["uuid"])
	if a == nil {
		return nil, errNotFound(codeNotFound, "uuid", "entry doesn't exist")
	}
	return c.instance(aggrResource, s.renderAggr(c.usage(), a))
}

func (s *Simulator) renderSVM(u *usage, svm *svmState) map[string]any {
	var aggrs, lifs []any
	for _, id := range svm.Aggregates {
		if a := s.m.aggr(id); a != nil {
			aggrs = append(aggrs, map[string]any{
				"name": a.Name, "uuid": a.UUID, "available_size": u.aggrAvailable(a),
				"state": "online", "type": a.DiskType, "snaplock_type": "non_snaplock",
			})
		}
	}
	for _, l := range s.m.LIFs {
		if l.SVM == svm.UUID {
			lifs = append(lifs, map[string]any{"name": l.Name, "uuid": l.UUID, "ip": map[string]any{"address": l.IP}, "services": stringsAny(l.Services)})
		}
	}
	return map[string]any{
		"uuid": svm.UUID, "name": svm.Name, "state": "running", "subtype": "default", "language": "c.utf_8",
		"aggregates": aggrs, "aggregates_delegated": true, "max_volumes": "unlimited",
		"nfs":           map[string]any{"enabled": svm.NFS, "allowed": true},
		"iscsi":         map[string]any{"enabled": svm.ISCSI, "allowed": true},
		"fcp":           map[string]any{"enabled": false, "allowed": false},
		"nvme":          map[string]any{"enabled": false, "allowed": false},
		"ip_interfaces": lifs,
		"_links":        selfLink("/api/svm/svms/" + svm.UUID),
	}
}

func (s *Simulator) getSVMs(c *call) (*reply, *apiError) {
	u := c.usage()
	var recs []map[string]any
	for _, svm := range s.m.SVMs {
		recs = append(recs, s.renderSVM(u, svm))
	}
	return c.list(svmResource, recs)
}

func (s *Simulator) getSVM(c *call) (*reply, *apiError) {
	svm := s.m.svm(c.params["uuid"])
	if svm == nil {
		return nil, errNotFound(codeNotFound, "uuid", "entry doesn't exist")
	}
	return c.instance(svmResource, s.renderSVM(c.usage(), svm))
}

func (s *Simulator) renderLIF(l *lifState) map[string]any {
	family := "ipv4"
	if !strings.Contains(l.IP, ".") {
		family = "ipv6"
	}
	policy := "default-data-files"
	for _, sv := range l.Services {
		if sv == "data_iscsi" {
			policy = "default-data-blocks"
		}
	}
	state := "up"
	if !l.Up {
		state = "down"
	}
	rec := map[string]any{
		"uuid": l.UUID, "name": l.Name, "enabled": true, "state": state, "scope": "svm",
		"ip":             map[string]any{"address": l.IP, "netmask": l.Netmask, "family": family},
		"services":       stringsAny(l.Services),
		"service_policy": map[string]any{"name": policy},
		"ipspace":        map[string]any{"name": "Default"},
		"vip":            false,
		"_links":         selfLink("/api/network/ip/interfaces/" + l.UUID),
	}
	if svm := s.m.svm(l.SVM); svm != nil {
		rec["svm"] = map[string]any{"name": svm.Name, "uuid": svm.UUID}
	}
	if n := s.m.node(l.Node); n != nil {
		node := map[string]any{"name": n.Name, "uuid": n.UUID}
		port := map[string]any{"name": "e0a", "node": map[string]any{"name": n.Name}}
		rec["location"] = map[string]any{
			"node": node, "home_node": node, "port": port, "home_port": port,
			"is_home": true, "auto_revert": false, "failover": "home_port_only",
		}
	}
	return rec
}

func (s *Simulator) getLIFs(c *call) (*reply, *apiError) {
	var recs []map[string]any
	for _, l := range s.m.LIFs {
		recs = append(recs, s.renderLIF(l))
	}
	return c.list(lifResource, recs)
}

func (s *Simulator) getLIF(c *call) (*reply, *apiError) {
	for _, l := range s.m.LIFs {
		if l.UUID == c.params["uuid"] {
			return c.instance(lifResource, s.renderLIF(l))
		}
	}
	return nil, errNotFound(codeNotFound, "uuid", "entry doesn't exist")
}

func (s *Simulator) getSnapshotPolicies(c *call) (*reply, *apiError) {
	var recs []map[string]any
	svm := s.m.dataSVM()
	for _, p := range s.m.SnapshotPolicies {
		recs = append(recs, map[string]any{
			"uuid": p.UUID, "name": p.Name, "enabled": p.Name != "none", "scope": "svm",
			"svm":    map[string]any{"name": svm.Name, "uuid": svm.UUID},
			"_links": selfLink("/api/storage/snapshot-policies/" + p.UUID),
		})
	}
	return c.list(snapPolicyResource, recs)
}

// getSnapmirror answers Trident's pre-delete replication lookups: the
// simulator has no SnapMirror, so always 0 records (docs/design/ontap-rest.md §5), whatever fields or
// filters are asked for.
func (s *Simulator) getSnapmirror(c *call) (*reply, *apiError) {
	return &reply{status: http.StatusOK, body: map[string]any{
		"records": []any{}, "num_records": 0, "_links": selfLink(c.r.URL.RequestURI()),
	}}, nil
}

// postEMS accepts Trident's EMS heartbeat.
func (s *Simulator) postEMS(c *call) (*reply, *apiError) {
	return &reply{status: http.StatusCreated}, nil
}

func stringsAny(in []string) []any {
	out := make([]any, len(in))
	for i, s := range in {
		out[i] = s
	}
	return out
}

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }
