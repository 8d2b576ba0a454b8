package ontapsim

import (
	"net/http"
	"sort"
	"time"
)

// Tree quotas (docs/design/economy.md §2), as ONTAP documents them:
//   - A rule limits a qtree (qtree.name) or, with qtree.name "", is the
//     volume's default tree rule, from which every qtree without a rule of
//     its own gets a derived quota.
//   - Rules take effect only while quotas are on for the volume (PATCH
//     volume quota.enabled). Turning them on initializes: the state is
//     "initializing" while ONTAP scans the volume (nothing is enforced),
//     then "on", with every rule in force.
//   - While quotas are on, creating a rule for a qtree that already has a
//     derived quota, or changing a rule's limits, is applied at once by a
//     quota resize. Any other new rule is saved but not applied: the job
//     fails with 5308571 ("resize is skipped; disable and enable quotas").
//   - Limits are bytes, rounded up to whole KiB; -1 means no limit.

// quotaRuleState is a tree quota rule.
type quotaRuleState struct {
	UUID      string `json:"uuid"`
	Volume    string `json:"volume"` // volume UUID
	Qtree     string `json:"qtree"`  // "" = the default tree rule
	HardLimit int64  `json:"hard_limit"`
	SoftLimit int64  `json:"soft_limit"`
	FilesHard int64  `json:"files_hard"`
	FilesSoft int64  `json:"files_soft"`
	// Active: applied by the last initialization or resize.
	Active bool `json:"active"`
}

// volumeQuotaState is a volume's quota switch. Initialization ends at
// InitDone.
type volumeQuotaState struct {
	Enabled  bool      `json:"enabled"`
	InitDone time.Time `json:"init_done"`
}

var quotaRuleResource = &resource{
	schema: newSchema(`uuid svm.name svm.uuid volume.name volume.uuid qtree.name qtree.id type users.name users.id
		group.name group.id space.hard_limit space.soft_limit files.hard_limit files.soft_limit user_mapping _links`),
	keys:    []string{"uuid", "svm", "volume", "qtree", "type"},
	sortKey: "uuid",
}

var quotaRulePostFields = newSchema(`svm.name svm.uuid volume.name volume.uuid qtree.name qtree.id type
	space.hard_limit space.soft_limit files.hard_limit files.soft_limit`)

var quotaRulePatchFields = newSchema(`space.hard_limit space.soft_limit files.hard_limit files.soft_limit`)

var quotaReportResource = &resource{
	schema: newSchema(`index svm.name svm.uuid volume.name volume.uuid qtree.name qtree.id type specifier.name
		space.hard_limit space.soft_limit space.used.total space.used.hard_limit_percent
		files.hard_limit files.soft_limit files.used.total _links`),
	keys:    []string{"index", "svm", "volume", "qtree", "type"},
	sortKey: "index",
}

func (s *Simulator) quotaRoutes() {
	r := withResource(quotaRuleResource)
	s.add(get, "/api/storage/quota/rules", req, s.getQuotaRules)
	s.add(post, "/api/storage/quota/rules", req, s.postQuotaRule, async, r)
	s.add(get, "/api/storage/quota/rules/{uuid}", req, s.getQuotaRule)
	s.add(patch, "/api/storage/quota/rules/{uuid}", req, s.patchQuotaRule, async, r)
	s.add(del, "/api/storage/quota/rules/{uuid}", req, s.deleteQuotaRule, async, r)
	s.add(get, "/api/storage/quota/reports", req, s.getQuotaReports)
}

// quotaState is "off", "initializing" or "on".
func (m *model) quotaState(volume string) string {
	q := m.VolumeQuotas[volume]
	switch {
	case q == nil || !q.Enabled:
		return "off"
	case time.Now().Before(q.InitDone):
		return "initializing"
	}
	return "on"
}

// renderVolumeQuota adds quota.enabled and quota.state to a volume record.
func (s *Simulator) renderVolumeQuota(v *volumeState, rec map[string]any) {
	q := s.m.VolumeQuotas[v.UUID]
	rec["quota"] = map[string]any{"enabled": q != nil && q.Enabled, "state": s.m.quotaState(v.UUID)}
}

// setVolumeQuota turns quotas on (initializing every rule) or off. Called
// with mu held by the volume PATCH job.
func (s *Simulator) setVolumeQuota(v *volumeState, enabled bool) {
	m := s.m
	q := m.VolumeQuotas[v.UUID]
	if q == nil {
		q = &volumeQuotaState{}
		m.VolumeQuotas[v.UUID] = q
	}
	if q.Enabled == enabled {
		return
	}
	q.Enabled = enabled
	if enabled {
		q.InitDone = time.Now().Add(s.draw(s.cfg.Latency.QuotaInitialize))
	}
	for _, r := range m.QuotaRules {
		if r.Volume == v.UUID {
			r.Active = enabled
		}
	}
	s.syncVolumeQuotaMounts(v)
}

func (s *Simulator) renderQuotaRule(r *quotaRuleState) map[string]any {
	m := s.m
	v := m.Volumes[r.Volume]
	rec := map[string]any{
		"uuid": r.UUID, "type": "tree", "qtree": map[string]any{"name": r.Qtree},
		"space":  map[string]any{"hard_limit": r.HardLimit, "soft_limit": r.SoftLimit},
		"files":  map[string]any{"hard_limit": r.FilesHard, "soft_limit": r.FilesSoft},
		"_links": selfLink("/api/storage/quota/rules/" + r.UUID),
	}
	if v != nil {
		rec["volume"] = map[string]any{"name": v.Name, "uuid": v.UUID}
		if svm := m.svm(v.SVM); svm != nil {
			rec["svm"] = map[string]any{"name": svm.Name, "uuid": svm.UUID}
		}
		if q := m.qtreeByName(v.UUID, r.Qtree); q != nil {
			rec["qtree"] = map[string]any{"name": r.Qtree, "id": q.ID}
		}
	}
	return rec
}

func (s *Simulator) getQuotaRules(c *call) (*reply, *apiError) {
	qtree, byQtree := literalFilter(c.q.Get("qtree.name"))
	var recs []map[string]any
	for _, r := range s.m.QuotaRules {
		v := s.m.Volumes[r.Volume]
		if v == nil || !volumeSelected(c, v) || byQtree && r.Qtree != qtree {
			continue
		}
		recs = append(recs, s.renderQuotaRule(r))
	}
	return c.list(quotaRuleResource, recs)
}

func (s *Simulator) getQuotaRule(c *call) (*reply, *apiError) {
	r := s.m.QuotaRules[c.params["uuid"]]
	if r == nil {
		return nil, errNotFound(codeQuotaRuleNotFound, "uuid", "The specified quota rule UUID is invalid.")
	}
	return c.instance(quotaRuleResource, s.renderQuotaRule(r))
}

// quotaLimits are the limits of a rule create or PATCH; nil is unchanged
// (or no limit at create).
type quotaLimits struct {
	hard, soft, filesHard, filesSoft *int64
}

func readQuotaLimits(b *bodyReader) (quotaLimits, *apiError) {
	var l quotaLimits
	for _, f := range []struct {
		path string
		dst  **int64
		kib  bool
	}{{"space.hard_limit", &l.hard, true}, {"space.soft_limit", &l.soft, true},
		{"files.hard_limit", &l.filesHard, false}, {"files.soft_limit", &l.filesSoft, false}} {
		if n, ok := b.integer(f.path); ok {
			if n < -1 {
				return l, errInvalid(codeQuotaOutOfRange, f.path, "Input value is out of range for field %q.", f.path)
			}
			if f.kib && n > 0 {
				n = (n + 1023) &^ 1023 // ONTAP keeps limits in KiB
			}
			*f.dst = ptr(n)
		}
	}
	return l, b.err
}

// quotaRuleSpec is a validated rule create.
type quotaRuleSpec struct {
	SVM       *svmState
	Volume    string
	VolByUUID bool
	Qtree     string
	limits    quotaLimits
}

func (s *Simulator) parseQuotaRuleSpec(c *call) (*quotaRuleSpec, *apiError) {
	b := c.body
	if err := c.checkBody(quotaRulePostFields, quotaRuleResource); err != nil {
		return nil, err
	}
	svm, err := c.resolveSVM(b, true)
	if err != nil {
		return nil, err
	}
	spec := &quotaRuleSpec{SVM: svm}
	if u, ok := b.str("volume.uuid"); ok {
		spec.Volume, spec.VolByUUID = u, true
	} else if n, ok := b.str("volume.name"); ok {
		spec.Volume = n
	}
	typ, _ := b.enum("type", "user", "group", "tree")
	qtree, hasQtree := b.str("qtree.name")
	if b.err != nil {
		return nil, b.err
	}
	switch {
	case spec.Volume == "":
		return nil, errInvalid(codeQtreeNoVolume, "volume", "Either \"volume.name\" or \"volume.uuid\" must be provided.")
	case typ != "tree":
		return nil, errInvalid(codeNotSupported, "type", "Only tree quota rules are supported by the simulator.")
	case !hasQtree:
		return nil, errInvalid(codeQuotaNeedsQtree, "qtree.name", "qtree.name is a required input for creating a tree rule and users and group are not allowed.")
	}
	spec.Qtree = qtree
	if spec.limits, err = readQuotaLimits(b); err != nil {
		return nil, err
	}
	return spec, nil
}

func (s *Simulator) postQuotaRule(c *call) (*reply, *apiError) {
	spec, err := s.parseQuotaRuleSpec(c)
	if err != nil {
		return nil, err
	}
	j := s.startJob(c, spec.SVM, s.draw(s.cfg.Latency.QuotaRule), func() *apiError {
		return s.createQuotaRule(spec)
	}, nil)
	return asyncReply(j, "/api/storage/quota/rules"), nil
}

// createQuotaRule saves a rule and, with quotas on, activates it by a
// resize when the qtree already had a derived quota. Called with mu held.
func (s *Simulator) createQuotaRule(spec *quotaRuleSpec) *apiError {
	m := s.m
	v := m.Volumes[spec.Volume]
	if !spec.VolByUUID {
		v = m.volumeByName(spec.SVM.UUID, spec.Volume)
	}
	if v == nil || v.SVM != spec.SVM.UUID {
		return errNotFound(codeLUNVolNotFound, "volume", "The specified volume %q was not found.", spec.Volume)
	}
	if spec.Qtree != "" && m.qtreeByName(v.UUID, spec.Qtree) == nil {
		return errNotFound(codeQtreeNotFound, "qtree.name", "The specified qtree %q was not found in volume %q.", spec.Qtree, v.Name)
	}
	if m.quotaRule(v.UUID, spec.Qtree) != nil {
		return errConflict(codeDuplicate, "qtree.name", "A tree quota rule for qtree %q of volume %q already exists.", spec.Qtree, v.Name)
	}
	r := &quotaRuleState{UUID: newUUID(), Volume: v.UUID, Qtree: spec.Qtree, HardLimit: -1, SoftLimit: -1, FilesHard: -1, FilesSoft: -1}
	setLimits(r, spec.limits)
	derived := spec.Qtree != "" && m.activeDefaultRule(v.UUID) != nil
	m.QuotaRules[r.UUID] = r
	switch m.quotaState(v.UUID) {
	case "off":
		return nil
	case "initializing":
		return newError(http.StatusInternalServerError, codeQuotaResizeFailed, "",
			"Quota policy rule create operation succeeded, but quota resize failed due to internal error. To activate the rule, disable and enable quotas for this volume.")
	}
	if !derived {
		return errInvalid(codeQuotaResizeSkipped, "",
			"Quota policy rule create operation succeeded, but quota resize is skipped. To activate the rule, disable and enable quotas for this volume.")
	}
	r.Active = true
	s.syncVolumeQuotaMounts(v)
	return nil
}

func setLimits(r *quotaRuleState, l quotaLimits) {
	for _, f := range []struct {
		src *int64
		dst *int64
	}{{l.hard, &r.HardLimit}, {l.soft, &r.SoftLimit}, {l.filesHard, &r.FilesHard}, {l.filesSoft, &r.FilesSoft}} {
		if f.src != nil {
			*f.dst = *f.src
		}
	}
}

func (m *model) quotaRule(volume, qtree string) *quotaRuleState {
	for _, r := range m.QuotaRules {
		if r.Volume == volume && r.Qtree == qtree {
			return r
		}
	}
	return nil
}

func (m *model) activeDefaultRule(volume string) *quotaRuleState {
	if r := m.quotaRule(volume, ""); r != nil && r.Active {
		return r
	}
	return nil
}

func (s *Simulator) patchQuotaRule(c *call) (*reply, *apiError) {
	r := s.m.QuotaRules[c.params["uuid"]]
	if r == nil {
		return nil, errNotFound(codeQuotaRuleNotFound, "uuid", "The specified quota rule UUID is invalid.")
	}
	if err := c.patchBody(quotaRulePatchFields, quotaRuleResource); err != nil {
		return nil, err
	}
	limits, err := readQuotaLimits(c.body)
	if err != nil {
		return nil, err
	}
	id := r.UUID
	j := s.startJob(c, s.m.dataSVM(), s.draw(s.cfg.Latency.QuotaRule), func() *apiError {
		cur := s.m.QuotaRules[id]
		if cur == nil {
			return errNotFound(codeQuotaRuleNotFound, "uuid", "The specified quota rule UUID is invalid.")
		}
		setLimits(cur, limits)
		if v := s.m.Volumes[cur.Volume]; v != nil && cur.Active {
			s.syncVolumeQuotaMounts(v) // quota resize: in force at once
		}
		return nil
	}, nil)
	return asyncReply(j, ""), nil
}

func (s *Simulator) deleteQuotaRule(c *call) (*reply, *apiError) {
	r := s.m.QuotaRules[c.params["uuid"]]
	if r == nil {
		return nil, errNotFound(codeQuotaRuleNotFound, "uuid", "The specified quota rule UUID is invalid.")
	}
	id := r.UUID
	j := s.startJob(c, s.m.dataSVM(), s.draw(s.cfg.Latency.QuotaRule), func() *apiError {
		cur := s.m.QuotaRules[id]
		if cur == nil {
			return errNotFound(codeQuotaRuleNotFound, "uuid", "The specified quota rule UUID is invalid.")
		}
		delete(s.m.QuotaRules, id)
		if v := s.m.Volumes[cur.Volume]; v != nil {
			s.syncVolumeQuotaMounts(v)
		}
		return nil
	}, nil)
	return asyncReply(j, ""), nil
}

// qtreeLimit is the hard limit in force on a qtree: its own rule, else the
// one derived from the default rule; -1 when none (quotas not on, no
// rule, or no limit).
func (m *model) qtreeLimit(q *qtreeState) int64 {
	if m.quotaState(q.Volume) != "on" {
		return -1
	}
	if r := m.quotaRule(q.Volume, q.Name); r != nil && r.Active {
		return r.HardLimit
	}
	if r := m.activeDefaultRule(q.Volume); r != nil {
		return r.HardLimit
	}
	return -1
}

// getQuotaReports reports, for every volume whose quotas are on, each qtree
// with an explicit or derived tree quota and the default rule: limits and
// the space and files used.
func (s *Simulator) getQuotaReports(c *call) (*reply, *apiError) {
	m := s.m
	var recs []map[string]any
	for _, v := range m.Volumes {
		if m.quotaState(v.UUID) != "on" || !volumeSelected(c, v) {
			continue
		}
		if def := m.activeDefaultRule(v.UUID); def != nil {
			recs = append(recs, s.quotaReportRecord(v, nil, def))
		}
		for _, q := range m.qtreesOf(v.UUID) {
			r := m.quotaRule(v.UUID, q.Name)
			if r == nil || !r.Active {
				r = m.activeDefaultRule(v.UUID) // derived
			}
			if r != nil {
				recs = append(recs, s.quotaReportRecord(v, q, r))
			}
		}
	}
	sort.Slice(recs, func(i, j int) bool {
		return recs[i]["volume"].(map[string]any)["uuid"].(string)+"/"+recs[i]["qtree"].(map[string]any)["name"].(string) <
			recs[j]["volume"].(map[string]any)["uuid"].(string)+"/"+recs[j]["qtree"].(map[string]any)["name"].(string)
	})
	for i, r := range recs {
		r["index"] = i
	}
	return c.list(quotaReportResource, recs)
}

func (s *Simulator) quotaReportRecord(v *volumeState, q *qtreeState, r *quotaRuleState) map[string]any {
	rec := map[string]any{
		"type": "tree", "volume": map[string]any{"name": v.Name, "uuid": v.UUID},
		"space": map[string]any{"hard_limit": r.HardLimit, "soft_limit": r.SoftLimit},
		"files": map[string]any{"hard_limit": r.FilesHard, "soft_limit": r.FilesSoft},
	}
	if svm := s.m.svm(v.SVM); svm != nil {
		rec["svm"] = map[string]any{"name": svm.Name, "uuid": svm.UUID}
	}
	if q == nil {
		rec["qtree"] = map[string]any{"name": ""}
		rec["specifier"] = map[string]any{"name": "*"}
		return rec
	}
	used, files := treeUsage(s.qtreeDir(q))
	rec["qtree"] = map[string]any{"name": q.Name, "id": q.ID}
	rec["specifier"] = map[string]any{"name": q.Name}
	space := rec["space"].(map[string]any)
	space["used"] = map[string]any{"total": used, "hard_limit_percent": percentOf(used, r.HardLimit)}
	rec["files"].(map[string]any)["used"] = map[string]any{"total": files}
	return rec
}

func percentOf(used, limit int64) int64 {
	if limit <= 0 {
		return 0
	}
	return used * 100 / limit
}

// initQuotaMaps gives a loaded model the maps of a state file written
// before qtrees existed.
func (m *model) initQuotaMaps() {
	if m.Qtrees == nil {
		m.Qtrees = map[string]*qtreeState{}
	}
	if m.QuotaRules == nil {
		m.QuotaRules = map[string]*quotaRuleState{}
	}
	if m.VolumeQuotas == nil {
		m.VolumeQuotas = map[string]*volumeQuotaState{}
	}
}
