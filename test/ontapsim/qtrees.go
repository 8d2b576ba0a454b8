package ontapsim

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Qtrees (docs/design/economy.md §1): a qtree is a named directory at the
// root of a FlexVol with its own export policy, security style and
// permissions, and the target of tree quotas (quotas.go). Every volume has
// the default qtree, id 0 and name "", which GET lists; explicit qtrees get
// ids from 1. Up to 4,995 per volume. Deleting a qtree deletes its quota
// rules; renaming it renames them (ONTAP's "How qtree changes affect
// quotas").

// qtreeState is an explicit qtree. Its data is the directory <name> of its
// volume's backing directory.
type qtreeState struct {
	Volume          string    `json:"volume"` // volume UUID
	ID              int       `json:"id"`
	Name            string    `json:"name"`
	SecurityStyle   string    `json:"security_style"`
	UnixPermissions int       `json:"unix_permissions"` // octal digits written as decimal
	ExportPolicy    int64     `json:"export_policy"`    // 0: the volume's
	QoSPolicy       string    `json:"qos_policy,omitempty"`
	CreateTime      time.Time `json:"create_time"`
}

const (
	maxQtreesPerVolume = 4995
	maxQtreeName       = 64
)

var qtreeResource = &resource{
	schema: newSchema(`svm.name svm.uuid volume.name volume.uuid id name security_style unix_permissions
		export_policy.name export_policy.id qos_policy.name path nas.path user.id user.name group.id group.name
		_links`),
	keys:    []string{"svm", "volume", "id", "name"},
	sortKey: "volume.uuid",
}

var qtreePostFields = newSchema(`svm.name svm.uuid volume.name volume.uuid name security_style unix_permissions
	export_policy.name export_policy.id qos_policy.name`)

var qtreePatchFields = newSchema(`name security_style unix_permissions export_policy.name export_policy.id qos_policy.name`)

func qtreeKey(volume string, id int) string { return volume + "/" + strconv.Itoa(id) }

func (s *Simulator) qtreeRoutes() {
	q := withResource(qtreeResource)
	s.add(get, "/api/storage/qtrees", req, s.getQtrees)
	s.add(post, "/api/storage/qtrees", req, s.postQtree, async, q)
	s.add(get, "/api/storage/qtrees/{volume.uuid}/{id}", req, s.getQtree)
	s.add(patch, "/api/storage/qtrees/{volume.uuid}/{id}", req, s.patchQtree, async, q)
	s.add(del, "/api/storage/qtrees/{volume.uuid}/{id}", req, s.deleteQtree, async, q)
}

// qtreesOf lists a volume's explicit qtrees by id.
func (m *model) qtreesOf(volume string) []*qtreeState {
	var out []*qtreeState
	for _, q := range m.Qtrees {
		if q.Volume == volume {
			out = append(out, q)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (m *model) qtreeByName(volume, name string) *qtreeState {
	for _, q := range m.Qtrees {
		if q.Volume == volume && q.Name == name {
			return q
		}
	}
	return nil
}

// qtreePolicy is the export policy in force on a qtree.
func (m *model) qtreePolicy(q *qtreeState) *policyState {
	if q.ExportPolicy != 0 {
		if p := m.ExportPolicies[q.ExportPolicy]; p != nil {
			return p
		}
	}
	if v := m.Volumes[q.Volume]; v != nil {
		return m.ExportPolicies[v.ExportPolicy]
	}
	return nil
}

func (s *Simulator) qtreeDir(q *qtreeState) string {
	return filepath.Join(s.volumeDir(q.Volume), q.Name)
}

// renderQtree renders an explicit qtree, or the default one of v when q is
// nil.
func (s *Simulator) renderQtree(v *volumeState, q *qtreeState) map[string]any {
	m := s.m
	def := &qtreeState{Volume: v.UUID, SecurityStyle: v.SecurityStyle, UnixPermissions: v.UnixPermissions}
	if q == nil {
		q = def
	}
	rec := map[string]any{
		"id": q.ID, "name": q.Name, "security_style": q.SecurityStyle, "unix_permissions": q.UnixPermissions,
		"volume": map[string]any{"name": v.Name, "uuid": v.UUID},
		"user":   map[string]any{"id": "0", "name": "root"}, "group": map[string]any{"id": "0", "name": "root"},
		"_links": selfLink(fmt.Sprintf("/api/storage/qtrees/%s/%d", v.UUID, q.ID)),
	}
	if svm := m.svm(v.SVM); svm != nil {
		rec["svm"] = map[string]any{"name": svm.Name, "uuid": svm.UUID}
	}
	if p := m.qtreePolicy(q); p != nil {
		rec["export_policy"] = map[string]any{"name": p.Name, "id": p.ID}
	}
	if q.QoSPolicy != "" {
		rec["qos_policy"] = map[string]any{"name": q.QoSPolicy}
	}
	if v.JunctionPath != "" {
		p := v.JunctionPath
		if q.Name != "" {
			p = path.Join(v.JunctionPath, q.Name)
		}
		rec["path"] = p
		rec["nas"] = map[string]any{"path": p}
	}
	return rec
}

// getQtrees lists the default and explicit qtrees of every volume. Plain
// name and volume filters pick the candidates before rendering: an SVM of
// thousands of qtrees is listed by name on every economy volume look-up.
func (s *Simulator) getQtrees(c *call) (*reply, *apiError) {
	m := s.m
	name, byName := literalFilter(c.q.Get("name"))
	var recs []map[string]any
	for _, v := range m.Volumes {
		if !volumeSelected(c, v) {
			continue
		}
		if !byName || name == "" {
			recs = append(recs, s.renderQtree(v, nil))
		}
		for _, q := range m.qtreesOf(v.UUID) {
			if !byName || q.Name == name {
				recs = append(recs, s.renderQtree(v, q))
			}
		}
	}
	return c.list(qtreeResource, recs)
}

// literalFilter returns a query value that matches one string exactly (no
// wildcard, alternative or operator), for pre-selection.
func literalFilter(q string) (string, bool) {
	if q == "" || strings.ContainsAny(q, "*|!<>.{}\"") {
		return "", false
	}
	return q, true
}

// volumeSelected reports whether a list's volume.uuid / volume.name filter
// (when it is a plain value) admits v.
func volumeSelected(c *call, v *volumeState) bool {
	if u, ok := literalFilter(c.q.Get("volume.uuid")); ok && u != v.UUID {
		return false
	}
	if n, ok := literalFilter(c.q.Get("volume.name")); ok && n != v.Name {
		return false
	}
	return true
}

// qtreeOf resolves the {volume.uuid}/{id} of a request; q is nil for the
// default qtree (id 0).
func (c *call) qtreeOf() (*volumeState, *qtreeState, *apiError) {
	v := c.m.Volumes[c.params["volume.uuid"]]
	id, err := strconv.Atoi(c.params["id"])
	if v == nil || err != nil || id < 0 {
		return nil, nil, errNotFound(codeNotFound, "id", "entry doesn't exist")
	}
	if id == 0 {
		return v, nil, nil
	}
	q := c.m.Qtrees[qtreeKey(v.UUID, id)]
	if q == nil {
		return nil, nil, errNotFound(codeNotFound, "id", "entry doesn't exist")
	}
	return v, q, nil
}

func (s *Simulator) getQtree(c *call) (*reply, *apiError) {
	v, q, err := c.qtreeOf()
	if err != nil {
		return nil, err
	}
	return c.instance(qtreeResource, s.renderQtree(v, q))
}

// qtreeSpec is a validated qtree create.
type qtreeSpec struct {
	SVM       *svmState
	Volume    string // name or uuid as given
	VolByUUID bool
	Name      string
	attrs     qtreeAttrs
}

// qtreeAttrs are the settable attributes of a qtree; nil is unchanged (or
// inherited from the volume at create).
type qtreeAttrs struct {
	SecurityStyle *string
	UnixPerms     *int
	ExportPolicy  *string
	ExportPolID   *int64
	QoSPolicy     *string
}

func validateQtreeName(name string) *apiError {
	switch {
	case name == "":
		return errInvalid(codeQtreeNameReserved, "name", "Qtree with empty name \"\" is not allowed, as that is reserved for the default qtree.")
	case len(name) > maxQtreeName:
		return errInvalid(codeQtreeBadValue, "name", "Invalid field value: qtree name %q is longer than %d characters.", name, maxQtreeName)
	case strings.ContainsAny(name, "/\\ \t\n\"'*?") || name == "." || name == ".." || strings.HasPrefix(name, "."):
		return errInvalid(codeQtreeBadValue, "name", "Invalid field value: qtree name %q.", name)
	}
	return nil
}

func readQtreeAttrs(b *bodyReader) (qtreeAttrs, *apiError) {
	var a qtreeAttrs
	if ss, ok := b.enum("security_style", "unix", "ntfs", "mixed"); ok {
		a.SecurityStyle = &ss
	}
	if up, ok := b.integer("unix_permissions"); ok {
		if !permDigits.MatchString(strconv.FormatInt(up, 10)) {
			return a, errInvalid(codeQtreeBadValue, "unix_permissions", "Invalid field value: unix_permissions %d.", up)
		}
		a.UnixPerms = ptr(int(up))
	}
	if ep, ok := b.str("export_policy.name"); ok {
		a.ExportPolicy = &ep
	} else if id, ok := b.integer("export_policy.id"); ok {
		a.ExportPolID = &id
	}
	if qp, ok := b.str("qos_policy.name"); ok {
		a.QoSPolicy = &qp
	}
	return a, b.err
}

func (s *Simulator) parseQtreeSpec(c *call) (*qtreeSpec, *apiError) {
	b := c.body
	if err := c.checkBody(qtreePostFields, qtreeResource); err != nil {
		return nil, err
	}
	svm, err := c.resolveSVM(b, true)
	if err != nil {
		return nil, err
	}
	spec := &qtreeSpec{SVM: svm}
	name, hasName := b.str("name")
	if u, ok := b.str("volume.uuid"); ok {
		spec.Volume, spec.VolByUUID = u, true
	} else if n, ok := b.str("volume.name"); ok {
		spec.Volume = n
	}
	if b.err != nil {
		return nil, b.err
	}
	switch {
	case spec.Volume == "":
		return nil, errInvalid(codeQtreeNoVolume, "volume", "Either \"volume.name\" or \"volume.uuid\" must be provided.")
	case !hasName:
		return nil, errInvalid(codeQtreeNoName, "name", "Qtree name must be provided.")
	}
	if err := validateQtreeName(name); err != nil {
		return nil, err
	}
	spec.Name = name
	if spec.attrs, err = readQtreeAttrs(b); err != nil {
		return nil, err
	}
	return spec, nil
}

func (s *Simulator) postQtree(c *call) (*reply, *apiError) {
	spec, err := s.parseQtreeSpec(c)
	if err != nil {
		return nil, err
	}
	j := s.startJob(c, spec.SVM, s.draw(s.cfg.Latency.QtreeCreate), func() *apiError {
		_, err := s.createQtree(spec)
		return err
	}, nil)
	return asyncReply(j, "/api/storage/qtrees?name="+spec.Name), nil
}

// createQtree applies a qtree create (the job's commit). Called with mu held.
func (s *Simulator) createQtree(spec *qtreeSpec) (*qtreeState, *apiError) {
	m := s.m
	v := m.Volumes[spec.Volume]
	if !spec.VolByUUID {
		v = m.volumeByName(spec.SVM.UUID, spec.Volume)
	}
	if v == nil || v.SVM != spec.SVM.UUID {
		return nil, errNotFound(codeLUNVolNotFound, "volume", "The specified volume %q was not found.", spec.Volume)
	}
	existing := m.qtreesOf(v.UUID)
	switch {
	case v.State != "online":
		return nil, errInvalid(codeQtreeCreateFailed, "volume", "Failed to create qtree: volume %q is not online.", v.Name)
	case v.Type != "rw":
		return nil, errInvalid(codeQtreeReadOnly, "volume", "Cannot create qtree because the volume is read-only.")
	case m.qtreeByName(v.UUID, spec.Name) != nil:
		return nil, errInvalid(codeQtreeCreateFailed, "name", "Failed to create qtree: qtree %q already exists in volume %q.", spec.Name, v.Name)
	case len(existing) >= maxQtreesPerVolume:
		return nil, errInvalid(codeQtreeCreateFailed, "name", "Failed to create qtree: volume %q already has the maximum number of qtrees (%d).", v.Name, maxQtreesPerVolume)
	}
	q := &qtreeState{
		Volume: v.UUID, Name: spec.Name, SecurityStyle: v.SecurityStyle, UnixPermissions: v.UnixPermissions,
		CreateTime: time.Now(),
	}
	if err := s.setQtreeAttrs(v, q, spec.attrs); err != nil {
		return nil, err
	}
	q.ID = freeQtreeID(existing)
	dir := s.qtreeDir(q)
	if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
		return nil, newError(http.StatusInternalServerError, codeQtreeCreateFailed, "", "Failed to create qtree: %v", err)
	}
	m.Qtrees[qtreeKey(v.UUID, q.ID)] = q
	if err := s.applyQtreeMode(q); err != nil {
		delete(m.Qtrees, qtreeKey(v.UUID, q.ID))
		os.RemoveAll(dir)
		return nil, newError(http.StatusInternalServerError, codeQtreeCreateFailed, "", "Failed to create qtree: %v", err)
	}
	return q, nil
}

func freeQtreeID(existing []*qtreeState) int {
	id := 1
	for _, q := range existing { // sorted by id
		if q.ID != id {
			break
		}
		id++
	}
	return id
}

// setQtreeAttrs checks and applies attribute changes to q.
func (s *Simulator) setQtreeAttrs(v *volumeState, q *qtreeState, a qtreeAttrs) *apiError {
	qos, err := s.resolveQoSChange(v.SVM, a.QoSPolicy, "qos_policy.name")
	if err != nil {
		return err
	}
	if a.ExportPolicy != nil || a.ExportPolID != nil {
		name, id := "", int64(0)
		if a.ExportPolicy != nil {
			name = *a.ExportPolicy
		} else {
			id = *a.ExportPolID
		}
		if name == "" && id == 0 {
			return errInvalid(codeQtreeBadPolicy, "export_policy", "Export Policy name specified is invalid.")
		}
		p, err := s.findPolicy(s.m.svm(v.SVM), name, id)
		if err != nil {
			return errNotFound(codeQtreeBadPolicy, "export_policy", "Export Policy name specified is invalid: %q.", name)
		}
		q.ExportPolicy = p.ID
	}
	if a.SecurityStyle != nil {
		q.SecurityStyle = *a.SecurityStyle
	}
	if a.UnixPerms != nil {
		q.UnixPermissions = *a.UnixPerms
	}
	if qos != nil {
		q.QoSPolicy = *qos
	}
	return nil
}

// applyQtreeMode gives the qtree's directory its mode (root-owned, as a
// qtree made by ONTAP) and, with quota mounts, its file system.
func (s *Simulator) applyQtreeMode(q *qtreeState) error {
	if err := s.syncQtreeMount(q); err != nil {
		return err
	}
	mode, err := octalMode(q.UnixPermissions)
	if err != nil {
		return err
	}
	return unix.Chmod(s.qtreeDir(q), mode)
}

func (s *Simulator) patchQtree(c *call) (*reply, *apiError) {
	v, q, err := c.qtreeOf()
	if err != nil {
		return nil, err
	}
	if err := c.patchBody(qtreePatchFields, qtreeResource); err != nil {
		return nil, err
	}
	name, hasName := c.body.str("name")
	attrs, err := readQtreeAttrs(c.body)
	if err != nil {
		return nil, err
	}
	if q == nil {
		return nil, errInvalid(codeQtreeNameReserved, "id", "The default qtree of volume %q cannot be modified here; modify the volume.", v.Name)
	}
	if hasName {
		if err := validateQtreeName(name); err != nil {
			return nil, err
		}
	}
	key := qtreeKey(v.UUID, q.ID)
	j := s.startJob(c, s.m.svm(v.SVM), s.draw(s.cfg.Latency.QtreePatch), func() *apiError {
		cur := s.m.Qtrees[key]
		vol := s.m.Volumes[v.UUID]
		if cur == nil || vol == nil {
			return errNotFound(codeNotFound, "id", "entry doesn't exist")
		}
		return s.modifyQtree(vol, cur, name, hasName, attrs)
	}, nil)
	return asyncReply(j, ""), nil
}

// modifyQtree renames a qtree (its quota rules follow) and applies its
// attributes, all or nothing. Called with mu held.
func (s *Simulator) modifyQtree(v *volumeState, q *qtreeState, name string, rename bool, a qtreeAttrs) *apiError {
	rename = rename && name != q.Name
	if rename && s.m.qtreeByName(v.UUID, name) != nil {
		return errInvalid(codeQtreeCreateFailed, "name", "Qtree %q already exists in volume %q.", name, v.Name)
	}
	next := *q
	if err := s.setQtreeAttrs(v, &next, a); err != nil {
		return err
	}
	if rename {
		if err := s.moveQtreeDir(q, name); err != nil {
			return newError(http.StatusInternalServerError, codeQtreeCreateFailed, "", "Failed to rename qtree: %v", err)
		}
		for _, r := range s.m.QuotaRules {
			if r.Volume == v.UUID && r.Qtree == q.Name {
				r.Qtree = name
			}
		}
		next.Name = name
	}
	*q = next
	if a.UnixPerms != nil {
		if err := s.applyQtreeMode(q); err != nil {
			return newError(http.StatusInternalServerError, codeQtreeCreateFailed, "", "Failed to apply permissions: %v", err)
		}
	}
	return nil
}

func (s *Simulator) deleteQtree(c *call) (*reply, *apiError) {
	v, q, err := c.qtreeOf()
	if err != nil {
		return nil, err
	}
	if q == nil {
		return nil, errInvalid(codeQtreeNameReserved, "id", "The default qtree of volume %q cannot be deleted.", v.Name)
	}
	key := qtreeKey(v.UUID, q.ID)
	j := s.startJob(c, s.m.svm(v.SVM), s.draw(s.cfg.Latency.QtreeDelete), func() *apiError {
		cur := s.m.Qtrees[key]
		if cur == nil {
			return errNotFound(codeNotFound, "id", "entry doesn't exist")
		}
		return s.destroyQtree(cur)
	}, nil)
	return asyncReply(j, ""), nil
}

// destroyQtree deletes a qtree, its data and its quota rules. Called with
// mu held.
func (s *Simulator) destroyQtree(q *qtreeState) *apiError {
	if err := s.unmountQtree(q); err != nil {
		return newError(http.StatusInternalServerError, codeQtreeCreateFailed, "", "Failed to delete qtree: %v", err)
	}
	if err := os.RemoveAll(s.qtreeDir(q)); err != nil {
		return newError(http.StatusInternalServerError, codeQtreeCreateFailed, "", "Failed to delete qtree: %v", err)
	}
	delete(s.m.Qtrees, qtreeKey(q.Volume, q.ID))
	for id, r := range s.m.QuotaRules {
		if r.Volume == q.Volume && r.Qtree == q.Name {
			delete(s.m.QuotaRules, id)
		}
	}
	return nil
}

// dropQtreesOf forgets the qtrees, quota rules and quota state of a volume
// being deleted, and unmounts their file systems. Called with mu held.
func (s *Simulator) dropQtreesOf(v *volumeState) {
	for _, q := range s.m.qtreesOf(v.UUID) {
		_ = s.unmountQtree(q)
		delete(s.m.Qtrees, qtreeKey(q.Volume, q.ID))
	}
	for id, r := range s.m.QuotaRules {
		if r.Volume == v.UUID {
			delete(s.m.QuotaRules, id)
		}
	}
	delete(s.m.VolumeQuotas, v.UUID)
}

// policyUsedByQtree names a qtree that has p as its own export policy.
func (m *model) policyUsedByQtree(p *policyState) *qtreeState {
	for _, q := range m.Qtrees {
		if q.ExportPolicy == p.ID {
			return q
		}
	}
	return nil
}

// qtreeExportAccess decides an NFS client's access to rel, a path inside
// volume v, when rel lies in an explicit qtree: the qtree's export policy
// decides (the volume's policy has already admitted the client to the
// volume, as every volume on the way must). ok is false outside qtrees.
func (m *model) qtreeExportAccess(v *volumeState, rel, client string) (access string, denied *planeError, ok bool) {
	first, _, _ := strings.Cut(rel, "/")
	q := m.qtreeByName(v.UUID, first)
	if rel == "" || q == nil {
		return "", nil, false
	}
	pol := m.qtreePolicy(q)
	var ro, rw bool
	if pol != nil {
		if ip := net.ParseIP(client); ip != nil {
			ro, rw = policyAccess(pol, ip)
		}
	}
	if !ro {
		name := "<none>"
		if pol != nil {
			name = pol.Name
		}
		return "", &planeError{http.StatusForbidden, fmt.Sprintf("access denied: export policy %q of qtree %s/%s does not allow client %s", name, v.Name, q.Name, client)}, true
	}
	if rw {
		return "rw", nil, true
	}
	return "ro", nil, true
}
