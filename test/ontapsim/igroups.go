package ontapsim

import (
	"regexp"
	"strings"
)

var igroupResource = &resource{
	schema: newSchema(`uuid name svm.name svm.uuid protocol os_type comment delete_on_unmap initiators.name
		initiators.comment lun_maps.logical_unit_number lun_maps.lun.name lun_maps.lun.uuid
		lun_maps.lun.node.name lun_maps.lun.node.uuid _links`),
	keys:    []string{"svm.name", "svm.uuid", "uuid", "name"},
	sortKey: "uuid",
}

var initiatorResource = &resource{
	schema:  newSchema(`name comment igroup.name igroup.uuid _links`),
	keys:    []string{"name"},
	sortKey: "name",
}

var (
	igroupPostFields  = newSchema(`name svm.name svm.uuid protocol os_type comment delete_on_unmap initiators.name initiators.comment`)
	igroupPatchFields = newSchema(`name comment os_type delete_on_unmap`)
	initiatorFields   = newSchema(`name comment records.name records.comment`)
)

var igroupOSTypes = []string{"aix", "hpux", "hyper_v", "linux", "netware", "openvms", "solaris", "vmware", "windows", "xen"}

var (
	igroupNameRE = regexp.MustCompile(`^[A-Za-z0-9_.:\-]+$`)
	iqnRE        = regexp.MustCompile(`^(?i)iqn\.\d{4}-\d{2}\.[a-z0-9][a-z0-9.\-]*(:.+)?$`)
	euiRE        = regexp.MustCompile(`^(?i)eui\.[0-9a-f]{16}$`)
	wwpnRE       = regexp.MustCompile(`^(?i)([0-9a-f]{2}:){7}[0-9a-f]{2}$`)
)

func validateIgroupName(name string) *apiError {
	switch {
	case name == "":
		return errInvalid(codeMissingRequired, "name", "Request missing required value \"name\".")
	case len(name) > 96 || !igroupNameRE.MatchString(name):
		return errInvalid(codeIgroupNameInvalid, "name", "Invalid initiator group name %q: 1 to 96 characters from A-Z, a-z, 0-9, \"_\", \".\", \":\" and \"-\".", name)
	}
	return nil
}

func validateInitiator(name, protocol string) *apiError {
	iscsi := len(name) <= 223 && (iqnRE.MatchString(name) || euiRE.MatchString(name))
	fcp := wwpnRE.MatchString(name)
	ok := (protocol == "iscsi" && iscsi) || (protocol == "fcp" && fcp) || (protocol == "mixed" && (iscsi || fcp))
	if !ok {
		return errInvalid(codeInitiatorInvalid, "initiators.name", "Invalid initiator name %q for protocol %q.", name, protocol)
	}
	return nil
}

func (g *igroupState) hasInitiator(name string) bool {
	for _, i := range g.Initiators {
		if strings.EqualFold(i.Name, name) {
			return true
		}
	}
	return false
}

// igroupsWith lists the igroups of svm that contain the initiator.
func (m *model) igroupsWith(svm, init string) []*igroupState {
	var out []*igroupState
	for _, g := range m.IGroups {
		if g.SVM == svm && g.hasInitiator(init) {
			out = append(out, g)
		}
	}
	return out
}

// checkInitiatorJoin verifies that adding init to g keeps every initiator's
// view consistent: same os_type everywhere (5374732), no LUN seen twice
// (1254193) and no LUN ID seen for two LUNs (1254324).
func (m *model) checkInitiatorJoin(g *igroupState, init string) *apiError {
	for _, other := range m.igroupsWith(g.SVM, init) {
		if other == g {
			continue
		}
		if other.OSType != g.OSType {
			return errInvalid(codeInitiatorOSConflict, "initiators.name", "Initiator %q is already in initiator group %q with a conflicting os_type %q.", init, other.Name, other.OSType)
		}
		for _, mine := range m.mapsOfIGroup(g.UUID) {
			for _, theirs := range m.mapsOfIGroup(other.UUID) {
				if mine.LUN == theirs.LUN {
					return errConflict(codeInitiatorSameLUN, "initiators.name", "Adding initiator %q would map it to LUN %q twice (through initiator group %q).", init, m.lunPath(m.LUNs[mine.LUN]), other.Name)
				}
				if mine.ID == theirs.ID {
					return errConflict(codeInitiatorSameLUNID, "initiators.name", "Adding initiator %q would make it see LUN ID %d for more than one LUN (initiator group %q).", init, mine.ID, other.Name)
				}
			}
		}
	}
	return nil
}

func (s *Simulator) renderIgroup(g *igroupState) map[string]any {
	m := s.m
	rec := map[string]any{
		"uuid": g.UUID, "name": g.Name, "protocol": g.Protocol, "os_type": g.OSType,
		"delete_on_unmap": g.DeleteOnUnmap,
		"_links":          selfLink("/api/protocols/san/igroups/" + g.UUID),
	}
	if svm := m.svm(g.SVM); svm != nil {
		rec["svm"] = map[string]any{"name": svm.Name, "uuid": svm.UUID}
	}
	if g.Comment != "" {
		rec["comment"] = g.Comment
	}
	if len(g.Initiators) > 0 {
		var inits []any
		for _, i := range g.Initiators {
			e := map[string]any{"name": i.Name}
			if i.Comment != "" {
				e["comment"] = i.Comment
			}
			inits = append(inits, e)
		}
		rec["initiators"] = inits
	}
	if maps := m.mapsOfIGroup(g.UUID); len(maps) > 0 {
		var lm []any
		for _, mp := range maps {
			l := m.LUNs[mp.LUN]
			lun := map[string]any{"name": m.lunPath(l), "uuid": l.UUID}
			if n := m.lunNode(l); n != nil {
				lun["node"] = map[string]any{"name": n.Name, "uuid": n.UUID}
			}
			lm = append(lm, map[string]any{"logical_unit_number": mp.ID, "lun": lun})
		}
		rec["lun_maps"] = lm
	}
	return rec
}

func (s *Simulator) getIgroups(c *call) (*reply, *apiError) {
	var recs []map[string]any
	for _, g := range s.m.IGroups {
		recs = append(recs, s.renderIgroup(g))
	}
	return c.list(igroupResource, recs)
}

func (c *call) igroup(param string) (*igroupState, *apiError) {
	g := c.m.IGroups[c.params[param]]
	if g == nil {
		return nil, errNotFound(codeIgroupNotFound, "uuid", "The specified initiator group does not exist.")
	}
	return g, nil
}

func (s *Simulator) getIgroup(c *call) (*reply, *apiError) {
	g, err := c.igroup("uuid")
	if err != nil {
		return nil, err
	}
	return c.instance(igroupResource, s.renderIgroup(g))
}

func (s *Simulator) postIgroup(c *call) (*reply, *apiError) {
	b := c.body
	if err := c.checkBody(igroupPostFields, igroupResource); err != nil {
		return nil, err
	}
	svm, err := c.resolveSVM(b, true)
	if err != nil {
		return nil, err
	}
	g := &igroupState{UUID: newUUID(), SVM: svm.UUID, Protocol: "mixed"}
	g.Name, _ = b.str("name")
	if p, ok := b.enum("protocol", "iscsi", "fcp", "mixed"); ok {
		g.Protocol = p
	}
	os, hasOS := b.enum("os_type", igroupOSTypes...)
	g.OSType = os
	g.Comment, _ = b.str("comment")
	g.DeleteOnUnmap, _ = b.boolean("delete_on_unmap")
	inits, _ := b.objects("initiators")
	if b.err != nil {
		return nil, b.err
	}
	if err := validateIgroupName(g.Name); err != nil {
		return nil, err
	}
	if !hasOS {
		return nil, errInvalid(codeMissingRequired, "os_type", "Request missing required value \"os_type\".")
	}
	for _, ib := range inits {
		name, _ := ib.str("name")
		comment, _ := ib.str("comment")
		if ib.err != nil {
			return nil, ib.err
		}
		if err := validateInitiator(name, g.Protocol); err != nil {
			return nil, err
		}
		if g.hasInitiator(name) {
			return nil, errInvalid(codeInitiatorExists, "initiators.name", "Initiator %q is listed more than once.", name)
		}
		g.Initiators = append(g.Initiators, initiator{Name: name, Comment: comment})
	}
	if s.m.igroupByName(svm.UUID, g.Name) != nil {
		return nil, errConflict(codeIgroupExists, "name", "An initiator group with the name %q already exists in SVM %q.", g.Name, svm.Name)
	}
	for _, i := range g.Initiators {
		if err := s.m.checkInitiatorJoin(g, i.Name); err != nil {
			return nil, err
		}
	}
	s.m.IGroups[g.UUID] = g
	return c.created(s.renderIgroup(g), "/api/protocols/san/igroups/"+g.UUID), nil
}

func (s *Simulator) patchIgroup(c *call) (*reply, *apiError) {
	g, err := c.igroup("uuid")
	if err != nil {
		return nil, err
	}
	if err := c.patchBody(igroupPatchFields, igroupResource); err != nil {
		return nil, err
	}
	b := c.body
	name, hasName := b.str("name")
	comment, hasComment := b.str("comment")
	os, hasOS := b.enum("os_type", igroupOSTypes...)
	dou, hasDOU := b.boolean("delete_on_unmap")
	if b.err != nil {
		return nil, b.err
	}
	if hasName {
		if err := validateIgroupName(name); err != nil {
			return nil, err
		}
		if other := s.m.igroupByName(g.SVM, name); other != nil && other != g {
			return nil, errConflict(codeIgroupExists, "name", "An initiator group with the name %q already exists.", name)
		}
		g.Name = name
	}
	if hasComment {
		g.Comment = comment
	}
	if hasOS {
		g.OSType = os
	}
	if hasDOU {
		g.DeleteOnUnmap = dou
	}
	return okReply(), nil
}

func (s *Simulator) deleteIgroup(c *call) (*reply, *apiError) {
	g, err := c.igroup("uuid")
	if err != nil {
		return nil, err
	}
	if len(s.m.mapsOfIGroup(g.UUID)) > 0 {
		if !c.queryBool("allow_delete_while_mapped") {
			return nil, errConflict(codeIgroupMapped, "uuid", "Initiator group %q is mapped to one or more LUNs. Unmap it or set allow_delete_while_mapped.", g.Name)
		}
		for _, lm := range s.m.mapsOfIGroup(g.UUID) {
			if err := s.cutLocked(lm); err != nil {
				return nil, err
			}
		}
		s.m.removeMaps(func(lm *lunMapState) bool { return lm.IGroup != g.UUID })
	}
	delete(s.m.IGroups, g.UUID)
	return okReply(), nil
}

// ---- initiators ----

func (s *Simulator) renderInitiator(g *igroupState, i initiator) map[string]any {
	rec := map[string]any{"name": i.Name, "igroup": map[string]any{"name": g.Name, "uuid": g.UUID},
		"_links": selfLink("/api/protocols/san/igroups/" + g.UUID + "/initiators/" + i.Name)}
	if i.Comment != "" {
		rec["comment"] = i.Comment
	}
	return rec
}

func (s *Simulator) getInitiators(c *call) (*reply, *apiError) {
	g, err := c.igroup("igroup.uuid")
	if err != nil {
		return nil, err
	}
	var recs []map[string]any
	for _, i := range g.Initiators {
		recs = append(recs, s.renderInitiator(g, i))
	}
	return c.list(initiatorResource, recs)
}

func (s *Simulator) getInitiator(c *call) (*reply, *apiError) {
	g, err := c.igroup("igroup.uuid")
	if err != nil {
		return nil, err
	}
	for _, i := range g.Initiators {
		if strings.EqualFold(i.Name, c.params["name"]) {
			return c.instance(initiatorResource, s.renderInitiator(g, i))
		}
	}
	return nil, errNotFound(codeInitiatorNotMember, "name", "Initiator %q is not a member of initiator group %q.", c.params["name"], g.Name)
}

// postInitiators adds {"name":...} or {"records":[{"name":...},...]}.
func (s *Simulator) postInitiators(c *call) (*reply, *apiError) {
	g, err := c.igroup("igroup.uuid")
	if err != nil {
		return nil, err
	}
	b := c.body
	if err := c.checkBody(initiatorFields, initiatorResource); err != nil {
		return nil, err
	}
	items := []*bodyReader{b}
	if recs, ok := b.objects("records"); ok {
		if b.has("name") {
			return nil, errInvalid(262186, "records", "The fields \"name\" and \"records\" cannot be used together.")
		}
		items = recs
	}
	if b.err != nil {
		return nil, b.err
	}
	var add []initiator
	for _, it := range items {
		name, _ := it.str("name")
		comment, _ := it.str("comment")
		if it.err != nil {
			return nil, it.err
		}
		if name == "" {
			return nil, errInvalid(codeInitiatorNone, "name", "No initiator was supplied.")
		}
		if err := validateInitiator(name, g.Protocol); err != nil {
			return nil, err
		}
		if g.hasInitiator(name) {
			return nil, errConflict(codeInitiatorExists, "name", "Initiator %q is already in initiator group %q.", name, g.Name)
		}
		for _, a := range add {
			if strings.EqualFold(a.Name, name) {
				return nil, errConflict(codeInitiatorExists, "name", "Initiator %q is listed more than once.", name)
			}
		}
		if err := s.m.checkInitiatorJoin(g, name); err != nil {
			return nil, err
		}
		add = append(add, initiator{Name: name, Comment: comment})
	}
	g.Initiators = append(g.Initiators, add...)
	rep := c.created(nil, "/api/protocols/san/igroups/"+g.UUID+"/initiators/"+add[0].Name)
	if c.returnRecords() {
		var recs []map[string]any
		for _, a := range add {
			recs = append(recs, s.renderInitiator(g, a))
		}
		rep.body = map[string]any{"num_records": len(recs), "records": recs}
	}
	return rep, nil
}

func (s *Simulator) deleteInitiator(c *call) (*reply, *apiError) {
	g, err := c.igroup("igroup.uuid")
	if err != nil {
		return nil, err
	}
	name := c.params["name"]
	idx := -1
	for i, in := range g.Initiators {
		if strings.EqualFold(in.Name, name) {
			idx = i
		}
	}
	if idx < 0 {
		return nil, errNotFound(codeInitiatorNotMember, "name", "Initiator %q is not a member of initiator group %q.", name, g.Name)
	}
	if len(s.m.mapsOfIGroup(g.UUID)) > 0 && !c.queryBool("allow_delete_while_mapped") {
		return nil, errConflict(codeIgroupMapped, "name", "Initiator group %q is mapped to one or more LUNs; removing initiator %q needs allow_delete_while_mapped.", g.Name, name)
	}
	g.Initiators = append(g.Initiators[:idx], g.Initiators[idx+1:]...)
	return okReply(), nil
}
