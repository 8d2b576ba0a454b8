package ontapsim

import (
	"net/http"
	"sort"
)

var lunMapResource = &resource{
	schema: newSchema(`svm.name svm.uuid lun.name lun.uuid lun.node.name lun.node.uuid igroup.name igroup.uuid
		igroup.os_type igroup.protocol igroup.initiators logical_unit_number reporting_nodes.name
		reporting_nodes.uuid _links`),
	keys:    []string{"svm.name", "svm.uuid", "lun.name", "lun.uuid", "igroup.name", "igroup.uuid"},
	sortKey: "_links.self.href", // unique per map; the cursor is opaque to clients
	cursor:  "start.lun_map",
}

var reportingNodeResource = &resource{
	schema:  newSchema(`uuid name _links`),
	keys:    []string{"uuid", "name"},
	sortKey: "name",
}

var (
	lunMapPostFields        = newSchema(`svm.name svm.uuid lun.name lun.uuid igroup.name igroup.uuid logical_unit_number`)
	reportingNodePostFields = newSchema("name uuid")
)

const maxLUNID = 4095

func (s *Simulator) renderLunMap(lm *lunMapState) map[string]any {
	m := s.m
	l, g := m.LUNs[lm.LUN], m.IGroups[lm.IGroup]
	lun := map[string]any{"name": m.lunPath(l), "uuid": l.UUID}
	if n := m.lunNode(l); n != nil {
		lun["node"] = map[string]any{"name": n.Name, "uuid": n.UUID}
	}
	// A lun-map's igroup.initiators is a list of names (ONTAP's
	// lun_map schema), unlike an igroup's initiators, which are objects.
	var inits []any
	for _, i := range g.Initiators {
		inits = append(inits, i.Name)
	}
	ig := map[string]any{"name": g.Name, "uuid": g.UUID, "os_type": g.OSType, "protocol": g.Protocol}
	if inits != nil {
		ig["initiators"] = inits
	}
	var nodes []any
	for _, id := range lm.ReportingNodes {
		if n := m.node(id); n != nil {
			nodes = append(nodes, map[string]any{"name": n.Name, "uuid": n.UUID})
		}
	}
	rec := map[string]any{
		"lun": lun, "igroup": ig, "logical_unit_number": lm.ID, "reporting_nodes": nodes,
		"_links": selfLink("/api/protocols/san/lun-maps/" + l.UUID + "/" + g.UUID),
	}
	if svm := m.svm(l.SVM); svm != nil {
		rec["svm"] = map[string]any{"name": svm.Name, "uuid": svm.UUID}
	}
	return rec
}

func (s *Simulator) getLunMaps(c *call) (*reply, *apiError) {
	var recs []map[string]any
	for _, lm := range s.m.LUNMaps {
		recs = append(recs, s.renderLunMap(lm))
	}
	return c.list(lunMapResource, recs)
}

// lunMapFromPath resolves /{lun.uuid}/{igroup.uuid}; igroupMissing is the
// endpoint's code for a missing igroup.
func (c *call) lunMapFromPath(igroupMissing int) (*lunMapState, *apiError) {
	l := c.m.LUNs[c.params["lun.uuid"]]
	if l == nil {
		return nil, errNotFound(codeLUNNotFound, "lun.uuid", "The specified LUN does not exist.")
	}
	g := c.m.IGroups[c.params["igroup.uuid"]]
	if g == nil || g.SVM != l.SVM {
		return nil, errNotFound(igroupMissing, "igroup.uuid", "The specified initiator group does not exist in the LUN's SVM.")
	}
	lm := c.m.lunMap(l.UUID, g.UUID)
	if lm == nil {
		return nil, errNotFound(codeMapNotFound, "", "LUN map for LUN %q and initiator group %q does not exist.", c.m.lunPath(l), g.Name)
	}
	return lm, nil
}

func (s *Simulator) getLunMap(c *call) (*reply, *apiError) {
	lm, err := c.lunMapFromPath(codeIgroupNotFound)
	if err != nil {
		return nil, err
	}
	return c.instance(lunMapResource, s.renderLunMap(lm))
}

// usedLUNIDs are the IDs a new map into g must avoid: those of g's maps and
// of every map seen by one of g's initiators through another igroup.
func (m *model) usedLUNIDs(g *igroupState) map[int]bool {
	used := map[int]bool{}
	for _, lm := range m.mapsOfIGroup(g.UUID) {
		used[lm.ID] = true
	}
	for _, i := range g.Initiators {
		for _, other := range m.igroupsWith(g.SVM, i.Name) {
			for _, lm := range m.mapsOfIGroup(other.UUID) {
				used[lm.ID] = true
			}
		}
	}
	return used
}

func (s *Simulator) postLunMap(c *call) (*reply, *apiError) {
	m := s.m
	b := c.body
	if err := c.checkBody(lunMapPostFields, lunMapResource); err != nil {
		return nil, err
	}
	svm, err := c.resolveSVM(b, false)
	if err != nil {
		return nil, err
	}
	t, err := m.readMapTarget(b, svm)
	if err != nil {
		return nil, err
	}
	l, g := t.lun, t.igroup
	if err := m.checkNewMap(l, g); err != nil {
		return nil, err
	}
	lunID, err := m.pickLUNID(g, t.id)
	if err != nil {
		return nil, err
	}
	nodes, err := m.mapReportingNodes(c, l, g, svm)
	if err != nil {
		return nil, err
	}
	lm := &lunMapState{LUN: l.UUID, IGroup: g.UUID, ID: lunID, ReportingNodes: nodes}
	m.LUNMaps = append(m.LUNMaps, lm)
	return c.created(s.renderLunMap(lm), "/api/protocols/san/lun-maps/"+l.UUID+"/"+g.UUID), nil
}

// lunMapTarget is what a LUN map create names: the LUN, the igroup and
// the LUN ID, nil for the lowest free one.
type lunMapTarget struct {
	lun    *lunState
	igroup *igroupState
	id     *int64
}

// readMapTarget reads the LUN, igroup and LUN ID of a map create.
func (m *model) readMapTarget(b *bodyReader, svm *svmState) (*lunMapTarget, *apiError) {
	lunName, hasLunName := b.str("lun.name")
	lunUUID, hasLunUUID := b.str("lun.uuid")
	igName, hasIgName := b.str("igroup.name")
	igUUID, hasIgUUID := b.str("igroup.uuid")
	id, hasID := b.integer("logical_unit_number")
	if b.err != nil {
		return nil, b.err
	}
	if !hasLunName && !hasLunUUID {
		return nil, errInvalid(codeMapNoLUN, "lun", "A LUN must be supplied (\"lun.name\" or \"lun.uuid\").")
	}
	if !hasIgName && !hasIgUUID {
		return nil, errInvalid(codeMapNoIgroup, "igroup", "An initiator group must be supplied (\"igroup.name\" or \"igroup.uuid\").")
	}
	if hasID && (id < 0 || id > maxLUNID) {
		return nil, errInvalid(codeInvalidValue, "logical_unit_number", "The value \"%d\" is invalid for field \"logical_unit_number\" (<0..4095>).", id)
	}
	var l *lunState
	if hasLunUUID {
		l = m.LUNs[lunUUID]
		if l != nil && hasLunName && m.lunPath(l) != lunName {
			return nil, errInvalid(codeInvalidValue, "lun", "\"lun.uuid\" and \"lun.name\" refer to different LUNs.")
		}
	} else {
		l = m.lunByPath(svm.UUID, lunName)
	}
	if l == nil {
		return nil, errNotFound(codeMapLUNNotFound, "lun", "LUN %q does not exist.", lunName+lunUUID)
	}
	var g *igroupState
	if hasIgUUID {
		g = m.IGroups[igUUID]
		if g != nil && hasIgName && g.Name != igName {
			return nil, errInvalid(codeInvalidValue, "igroup", "\"igroup.uuid\" and \"igroup.name\" refer to different initiator groups.")
		}
	} else {
		g = m.igroupByName(l.SVM, igName)
	}
	if g == nil {
		return nil, errNotFound(codeIgroupNotFound, "igroup", "Initiator group %q does not exist.", igName+igUUID)
	}
	if g.SVM != l.SVM || l.SVM != svm.UUID {
		return nil, errNotFound(codeMapIgroupOtherSVM, "igroup", "The initiator group and the LUN are not in the same SVM.")
	}
	t := &lunMapTarget{lun: l, igroup: g}
	if hasID {
		t.id = &id
	}
	return t, nil
}

// checkNewMap refuses a second map of l to g, and a map through which an
// initiator would see l twice.
func (m *model) checkNewMap(l *lunState, g *igroupState) *apiError {
	if m.lunMap(l.UUID, g.UUID) != nil {
		return errConflict(codeMapDuplicate, "", "LUN %q is already mapped to initiator group %q.", m.lunPath(l), g.Name)
	}
	// An initiator may not see one LUN through two igroups.
	for _, i := range g.Initiators {
		for _, other := range m.igroupsWith(g.SVM, i.Name) {
			if other != g && m.lunMap(l.UUID, other.UUID) != nil {
				return errConflict(codeInitiatorSameLUN, "", "Initiator %q would see LUN %q twice (it is mapped to initiator group %q).", i.Name, m.lunPath(l), other.Name)
			}
		}
	}
	return nil
}

// pickLUNID checks the requested LUN ID against those used in g and by its
// initiators, or picks the lowest free one.
func (m *model) pickLUNID(g *igroupState, id *int64) (int, *apiError) {
	used := m.usedLUNIDs(g)
	if id != nil {
		if used[int(*id)] {
			return -1, errConflict(codeMapLUNIDInUse, "logical_unit_number", "LUN ID %d is already used in initiator group %q or by one of its initiators.", *id, g.Name)
		}
		return int(*id), nil
	}
	for i := 0; i <= maxLUNID; i++ {
		if !used[i] {
			return i, nil
		}
	}
	return -1, errInvalid(codeResourceLimit, "logical_unit_number", "No free LUN ID in initiator group %q.", g.Name)
}

// mapReportingNodes are the LUN's default reporting nodes and those the
// query adds; an iSCSI map needs an iSCSI LIF on one of them.
func (m *model) mapReportingNodes(c *call, l *lunState, g *igroupState, svm *svmState) ([]string, *apiError) {
	nodes := m.defaultReportingNodes(l)
	for _, key := range []string{"additional_reporting_node.name", "additional_reporting_node.uuid"} {
		if v := c.q.Get(key); v != "" {
			n := m.nodeByName(v)
			if key == "additional_reporting_node.uuid" {
				n = m.node(v)
			}
			if n == nil {
				return nil, errNotFound(codeNotFound, key, "Node %q does not exist.", v)
			}
			if !contains(nodes, n.UUID) {
				nodes = append(nodes, n.UUID)
			}
		}
	}
	if g.Protocol != "fcp" {
		hasLIF := false
		for _, lif := range m.lifsOf(l.SVM, "data_iscsi") {
			if contains(nodes, lif.Node) {
				hasLIF = true
			}
		}
		if !hasLIF {
			return nil, errInvalid(codeMapNoISCSILIF, "", "None of the LUN's reporting nodes has an iSCSI LIF in SVM %q.", svm.Name)
		}
	}
	return nodes, nil
}

// defaultReportingNodes is the LUN's node and its HA partner (SLM).
func (m *model) defaultReportingNodes(l *lunState) []string {
	var nodes []string
	if n := m.lunNode(l); n != nil {
		nodes = append(nodes, n.UUID)
		if n.Partner != "" {
			nodes = append(nodes, n.Partner)
		}
	}
	return nodes
}

func (s *Simulator) deleteLunMap(c *call) (*reply, *apiError) {
	lm, err := c.lunMapFromPath(codeMapIgroupOtherSVM)
	if err != nil {
		return nil, err
	}
	if err := s.cutLocked(lm); err != nil {
		return nil, err
	}
	s.m.removeMaps(func(x *lunMapState) bool { return x != lm })
	if g := s.m.IGroups[lm.IGroup]; g != nil && g.DeleteOnUnmap && len(s.m.mapsOfIGroup(g.UUID)) == 0 {
		delete(s.m.IGroups, g.UUID)
	}
	return okReply(), nil
}

// ---- reporting nodes ----

func (s *Simulator) renderReportingNode(lm *lunMapState, n *nodeState) map[string]any {
	return map[string]any{"uuid": n.UUID, "name": n.Name,
		"_links": selfLink("/api/protocols/san/lun-maps/" + lm.LUN + "/" + lm.IGroup + "/reporting-nodes/" + n.UUID)}
}

func (s *Simulator) getReportingNodes(c *call) (*reply, *apiError) {
	lm, err := c.lunMapFromPath(codeIgroupNotFound)
	if err != nil {
		return nil, err
	}
	var recs []map[string]any
	for _, id := range lm.ReportingNodes {
		if n := s.m.node(id); n != nil {
			recs = append(recs, s.renderReportingNode(lm, n))
		}
	}
	return c.list(reportingNodeResource, recs)
}

func (s *Simulator) getReportingNode(c *call) (*reply, *apiError) {
	lm, err := c.lunMapFromPath(codeIgroupNotFound)
	if err != nil {
		return nil, err
	}
	if contains(lm.ReportingNodes, c.params["uuid"]) {
		if n := s.m.node(c.params["uuid"]); n != nil {
			return c.instance(reportingNodeResource, s.renderReportingNode(lm, n))
		}
	}
	return nil, errNotFound(codeNotFound, "uuid", "entry doesn't exist")
}

func (s *Simulator) postReportingNode(c *call) (*reply, *apiError) {
	lm, err := c.lunMapFromPath(codeIgroupNotFound)
	if err != nil {
		return nil, err
	}
	if err := c.checkBody(reportingNodePostFields, reportingNodeResource); err != nil {
		return nil, err
	}
	name, hasName := c.body.str("name")
	uuid, hasUUID := c.body.str("uuid")
	if c.body.err != nil {
		return nil, c.body.err
	}
	var n *nodeState
	switch {
	case hasUUID:
		n = s.m.node(uuid)
	case hasName:
		n = s.m.nodeByName(name)
	default:
		return nil, errInvalid(codeMissingRequired, "name", "Request missing required value \"name\".")
	}
	if n == nil {
		return nil, errNotFound(codeNotFound, "name", "Node %q does not exist.", name+uuid)
	}
	if contains(lm.ReportingNodes, n.UUID) {
		return nil, errConflict(codeDuplicate, "name", "Node %q is already a reporting node of the LUN map.", n.Name)
	}
	lm.ReportingNodes = append(lm.ReportingNodes, n.UUID)
	sort.Strings(lm.ReportingNodes)
	return c.created(s.renderReportingNode(lm, n), ""), nil
}

func (s *Simulator) deleteReportingNode(c *call) (*reply, *apiError) {
	lm, err := c.lunMapFromPath(codeIgroupNotFound)
	if err != nil {
		return nil, err
	}
	id := c.params["uuid"]
	if !contains(lm.ReportingNodes, id) {
		return nil, errNotFound(codeNotFound, "uuid", "entry doesn't exist")
	}
	if contains(s.m.defaultReportingNodes(s.m.LUNs[lm.LUN]), id) {
		return nil, errInvalid(codeInvalidField, "uuid", "The LUN's node and its HA partner cannot be removed from the reporting nodes.")
	}
	kept := lm.ReportingNodes[:0]
	for _, n := range lm.ReportingNodes {
		if n != id {
			kept = append(kept, n)
		}
	}
	lm.ReportingNodes = kept
	return &reply{status: http.StatusOK}, nil
}
