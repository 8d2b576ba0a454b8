package ontapsim

import (
	"net/http"
	"net/url"
	"time"
)

// Consistency groups (docs/design/ontap-rest.md §3.13, ONTAP 9.10+): a
// named set of existing volumes whose snapshot is taken of every member
// at the same instant. Deleting a group leaves its volumes and snapshots.

type cgState struct {
	UUID    string   `json:"uuid"`
	Name    string   `json:"name"`
	SVM     string   `json:"svm"`
	Volumes []string `json:"volumes"` // uuids
}

var cgResource = &resource{
	schema:  newSchema(`uuid name svm.name svm.uuid volumes.name volumes.uuid _links`),
	keys:    []string{"uuid", "name"},
	sortKey: "name",
}

var cgPostFields = newSchema(`name svm.name svm.uuid volumes.name volumes.provisioning_options.action`)

var cgSnapshotPostFields = newSchema(`name comment`)

// cgSnapshotResource: the simulator takes group snapshots and lists them
// only as the members' volume snapshots.
var cgSnapshotResource = &resource{schema: newSchema(`uuid name comment _links`), keys: []string{"uuid", "name"}, sortKey: "name"}

func (s *Simulator) cgRoutes() {
	cg := withResource(cgResource)
	s.add(get, "/api/application/consistency-groups", req, s.getCGs)
	s.add(post, "/api/application/consistency-groups", req, s.postCG, async, cg)
	s.add(del, "/api/application/consistency-groups/{uuid}", req, s.deleteCG, async, cg)
	s.add(post, "/api/application/consistency-groups/{consistency_group.uuid}/snapshots", req, s.postCGSnapshot,
		async, withResource(cgSnapshotResource))
}

// cgSupported: the endpoints exist from ONTAP 9.10.1; before, the path is
// unknown (**guess** for the exact answer: 404, "not supported").
func (s *Simulator) cgSupported() *apiError {
	if !s.cfg.versionAtLeast(9, 10, 1) {
		return newError(http.StatusNotFound, codeNotSupported, "", "API not found: consistency groups need ONTAP 9.10.1.")
	}
	return nil
}

func (s *Simulator) renderCG(g *cgState) map[string]any {
	rec := map[string]any{"uuid": g.UUID, "name": g.Name, "_links": selfLink("/api/application/consistency-groups/" + g.UUID)}
	if svm := s.m.svm(g.SVM); svm != nil {
		rec["svm"] = map[string]any{"name": svm.Name, "uuid": svm.UUID}
	}
	var vols []any
	for _, id := range g.Volumes {
		if v := s.m.Volumes[id]; v != nil {
			vols = append(vols, map[string]any{"name": v.Name, "uuid": v.UUID})
		}
	}
	rec["volumes"] = vols
	return rec
}

func (s *Simulator) getCGs(c *call) (*reply, *apiError) {
	if err := s.cgSupported(); err != nil {
		return nil, err
	}
	var recs []map[string]any
	for _, g := range s.m.ConsistencyGroups {
		recs = append(recs, s.renderCG(g))
	}
	return c.list(cgResource, recs)
}

// postCG makes a group of existing volumes (provisioning_options.action
// "add"); the simulator provisions no new storage through it.
func (s *Simulator) postCG(c *call) (*reply, *apiError) {
	if err := s.cgSupported(); err != nil {
		return nil, err
	}
	b := c.body
	if err := c.checkBody(cgPostFields, cgResource); err != nil {
		return nil, err
	}
	svm, err := c.resolveSVM(b, true)
	if err != nil {
		return nil, err
	}
	name, _ := b.str("name")
	items, _ := b.objects("volumes")
	var names []string
	for _, it := range items {
		n, _ := it.str("name")
		action, _ := it.str("provisioning_options.action")
		b.sub(it)
		if action != "add" {
			return nil, errInvalid(codeNotSupported, "volumes.provisioning_options.action",
				"The simulator only groups existing volumes (provisioning_options.action \"add\").")
		}
		names = append(names, n)
	}
	if b.err != nil {
		return nil, b.err
	}
	if name == "" || len(names) == 0 {
		return nil, errInvalid(codeMissingRequired, "volumes", "Request missing required value \"name\" or \"volumes\".")
	}
	j := s.startJob(c, svm, s.draw(s.cfg.Latency.Request), func() *apiError { return s.createCG(svm, name, names) }, nil)
	return asyncReply(j, "/api/application/consistency-groups?name="+url.QueryEscape(name), map[string]any{"name": name}), nil
}

// createCG is the commit of a group create. Called with mu held.
func (s *Simulator) createCG(svm *svmState, name string, volumes []string) *apiError {
	m := s.m
	for _, g := range m.ConsistencyGroups {
		if g.SVM == svm.UUID && g.Name == name {
			return errConflict(codeDuplicate, "name", "Consistency group %q already exists.", name)
		}
	}
	g := &cgState{UUID: newUUID(), Name: name, SVM: svm.UUID}
	for _, n := range volumes {
		v := m.volumeByName(svm.UUID, n)
		if v == nil {
			return errNotFound(codeNotFound, "volumes.name", "Volume %q does not exist in SVM %q.", n, svm.Name)
		}
		if other := m.cgOf(v.UUID); other != nil {
			return errConflict(codeInUse, "volumes.name", "Volume %q is already in consistency group %q.", n, other.Name)
		}
		g.Volumes = append(g.Volumes, v.UUID)
	}
	if m.ConsistencyGroups == nil {
		m.ConsistencyGroups = map[string]*cgState{}
	}
	m.ConsistencyGroups[g.UUID] = g
	return nil
}

func (m *model) cgOf(volume string) *cgState {
	for _, g := range m.ConsistencyGroups {
		for _, id := range g.Volumes {
			if id == volume {
				return g
			}
		}
	}
	return nil
}

func (s *Simulator) cgParam(c *call, param string) (*cgState, *apiError) {
	if err := s.cgSupported(); err != nil {
		return nil, err
	}
	g := s.m.ConsistencyGroups[c.params[param]]
	if g == nil {
		return nil, errNotFound(codeNotFound, param, "entry doesn't exist")
	}
	return g, nil
}

func (s *Simulator) deleteCG(c *call) (*reply, *apiError) {
	g, err := s.cgParam(c, "uuid")
	if err != nil {
		return nil, err
	}
	id := g.UUID
	j := s.startJob(c, s.m.svm(g.SVM), s.draw(s.cfg.Latency.Request), func() *apiError {
		delete(s.m.ConsistencyGroups, id)
		return nil
	}, nil)
	return asyncReply(j, ""), nil
}

// postCGSnapshot snapshots every member at one instant, or none.
func (s *Simulator) postCGSnapshot(c *call) (*reply, *apiError) {
	g, err := s.cgParam(c, "consistency_group.uuid")
	if err != nil {
		return nil, err
	}
	b := c.body
	if err := c.checkBody(cgSnapshotPostFields, cgSnapshotResource); err != nil {
		return nil, err
	}
	name, _ := b.str("name")
	comment, _ := b.str("comment")
	if b.err != nil {
		return nil, b.err
	}
	if err := validateSnapshotName(name); err != nil {
		return nil, err
	}
	id := g.UUID
	j := s.startJob(c, s.m.svm(g.SVM), s.draw(s.cfg.Latency.SnapshotCreate), func() *apiError {
		return s.snapshotCG(id, name, comment)
	}, nil)
	return asyncReply(j, "", map[string]any{"name": name}), nil
}

// snapshotCG is the commit of a group snapshot. Called with mu held.
func (s *Simulator) snapshotCG(id, name, comment string) *apiError {
	g := s.m.ConsistencyGroups[id]
	if g == nil {
		return errNotFound(codeNotFound, "consistency_group.uuid", "entry doesn't exist")
	}
	var vols []*volumeState
	for _, vid := range g.Volumes {
		v := s.m.Volumes[vid]
		switch {
		case v == nil:
			return errNotFound(codeNotFound, "volumes", "A member of consistency group %q no longer exists.", g.Name)
		case v.snapshotByName(name) != nil:
			return errConflict(codeSnapDuplicate, "name", "Snapshot %q already exists in volume %q.", name, v.Name)
		}
		vols = append(vols, v)
	}
	at := time.Now()
	var made []*snapshotState
	for _, v := range vols {
		sn, err := s.createSnapshot(v, name, comment)
		if err != nil {
			for i, m := range made {
				_ = s.destroySnapshot(vols[i], m.UUID)
			}
			return err
		}
		sn.CreateTime = at
		made = append(made, sn)
	}
	return nil
}
