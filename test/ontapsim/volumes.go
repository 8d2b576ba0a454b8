package ontapsim

import (
	"fmt"
	"maps"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

var volumeResource = &resource{
	schema: newSchema(`uuid name svm.name svm.uuid aggregates.name aggregates.uuid size state style type
		comment create_time language guarantee.type guarantee.honored snapshot_policy.name snapshot_policy.uuid
		snapshot_directory_access_enabled
		nas.path nas.security_style nas.unix_permissions nas.uid nas.gid nas.export_policy.name nas.export_policy.id
		nas.junction_parent.name nas.junction_parent.uuid
		space.size space.available space.used space.afs_total space.available_percent space.percent_used
		space.footprint space.over_provisioned space.physical_used space.large_size_enabled
		space.logical_space.used space.logical_space.available space.logical_space.used_by_afs
		space.logical_space.used_percent space.logical_space.reporting space.logical_space.enforcement
		space.snapshot.reserve_percent space.snapshot.reserve_size space.snapshot.reserve_available
		space.snapshot.used space.snapshot.space_used_percent space.snapshot.autodelete_enabled
		encryption.enabled encryption.state encryption.type
		clone.is_flexclone clone.has_flexclone clone.parent_volume.name clone.parent_volume.uuid
		clone.parent_snapshot.name clone.parent_snapshot.uuid clone.parent_svm.name clone.parent_svm.uuid
		clone.split_initiated clone.split_complete_percent clone.split_estimate
		autosize.mode autosize.maximum autosize.minimum autosize.grow_threshold autosize.shrink_threshold
		qos.policy.name qos.policy.uuid tiering.policy snapshot_count is_svm_root quota.enabled quota.state _links`),
	keys: []string{"uuid", "name"},
	// Expensive fields are only returned when named or with fields=** (docs/design/ontap-rest.md §3.5).
	expensive: []string{"nas.path", "nas.security_style", "nas.unix_permissions", "nas.uid", "nas.gid",
		"nas.export_policy.id", "nas.junction_parent", "clone.parent_volume", "clone.parent_snapshot",
		"clone.parent_svm", "clone.split_initiated", "clone.split_complete_percent", "clone.split_estimate",
		"encryption", "guarantee", "autosize", "qos", "space.logical_space", "space.snapshot", "space.footprint",
		"space.available_percent", "space.percent_used", "space.physical_used"},
	sortKey: "uuid",
}

var volumePostFields = newSchema(`name svm.name svm.uuid aggregates.name aggregates.uuid size state style type
	comment language guarantee.type snapshot_policy.name snapshot_policy.uuid snapshot_directory_access_enabled
	nas.path nas.security_style nas.unix_permissions nas.uid nas.gid nas.export_policy.name nas.export_policy.id
	space.snapshot.reserve_percent space.large_size_enabled encryption.enabled tiering.policy qos.policy.name
	qos.policy.uuid autosize.mode autosize.maximum autosize.minimum
	clone.parent_volume.name clone.parent_volume.uuid clone.parent_snapshot.name clone.parent_snapshot.uuid
	clone.parent_svm.name clone.parent_svm.uuid clone.is_flexclone`)

// Fields a FlexClone create may carry besides name/svm/clone (918247 otherwise).
var cloneCreateFields = newSchema(`name svm.name svm.uuid comment nas.path nas.export_policy.name
	nas.export_policy.id qos.policy.name qos.policy.uuid snapshot_policy.name guarantee.type state
	clone.parent_volume.name clone.parent_volume.uuid clone.parent_snapshot.name clone.parent_snapshot.uuid
	clone.parent_svm.name clone.parent_svm.uuid clone.is_flexclone`)

var volumePatchFields = newSchema(`name size state comment snapshot_policy.name snapshot_policy.uuid
	snapshot_directory_access_enabled nas.path nas.security_style nas.unix_permissions nas.uid nas.gid
	nas.export_policy.name nas.export_policy.id space.snapshot.reserve_percent space.large_size_enabled
	tiering.policy qos.policy.name qos.policy.uuid autosize.mode autosize.maximum autosize.minimum guarantee.type
	clone.split_initiated quota.enabled`)

const (
	minVolumeSize          = 20 * mib
	recoveryQueueRetention = 12 * time.Hour
)

var (
	volNameChars = regexp.MustCompile(`^[A-Za-z0-9_]+$`)
	permDigits   = regexp.MustCompile(`^[0-7]{1,4}$`)
)

func validateVolumeName(name, target string) *apiError {
	switch {
	case name == "":
		return errInvalid(codeMissingRequired, target, "Request missing required value %q.", target)
	case len(name) > 203:
		return errInvalid(codeVolNameTooLong, target, "Volume name %q is too long. The maximum length is 203 characters.", name)
	case !(name[0] == '_' || (name[0] >= 'a' && name[0] <= 'z') || (name[0] >= 'A' && name[0] <= 'Z')):
		return errInvalid(codeVolNameFirstChar, target, "Invalid volume name %q. The first character must be a letter or an underscore.", name)
	case !volNameChars.MatchString(name):
		return errInvalid(codeVolNameInvalid, target, "Invalid volume name %q. It can have '_' and alphanumeric characters.", name)
	}
	return nil
}

// validateJunctionSyntax checks the shape of nas.path (docs/design/ontap-rest.md §4.4); whether the
// path is free and its parent exists is checked when the job runs.
func validateJunctionSyntax(p string) *apiError {
	if p == "" {
		return nil
	}
	bad := !strings.HasPrefix(p, "/") || (p != "/" && strings.HasSuffix(p, "/")) || strings.Contains(p, "//") ||
		len(p) > 255 || path.Clean(p) != p
	if bad {
		return errInvalid(codeJunctionInvalid, "nas.path", "Invalid junction path %q. The path must start with \"/\" and must not end with \"/\".", p)
	}
	return nil
}

func roundUp4K(n int64) int64 { return (n + 4095) &^ 4095 }

// FlexVol size limits (docs/design/ontap-rest.md §4.2): 100 TiB, or 300 TiB
// with space.large_size_enabled (ONTAP 9.12.1 and later). The too-large
// error carries the too-small one's code and ONTAP's wording for both.
const (
	maxVolumeSize      = 100 * tib
	maxLargeVolumeSize = 300 * tib
)

func checkVolumeSize(size int64, large bool) *apiError {
	max, maxText := int64(maxVolumeSize), "100TB"
	if large {
		max, maxText = maxLargeVolumeSize, "300TB"
	}
	switch {
	case size < minVolumeSize:
		return errInvalid(codeVolSizeTooSmall, "size", "Size \"%s\" (\"%dB\") is too small. Minimum size is 20MB (20971520B).", humanSize(size), size)
	case size > max:
		return errInvalid(codeVolSizeTooSmall, "size", "Size \"%s\" (\"%dB\") is too large. Maximum size is %s (\"%dB\").", humanSize(size), size, maxText, max)
	}
	return nil
}

// checkLargeSize refuses space.large_size_enabled before ONTAP 9.12.1,
// which does not know the field.
func (s *Simulator) checkLargeSize(given bool) *apiError {
	if given && !s.cfg.versionAtLeast(9, 12, 1) {
		return errInvalid(codeUnexpectedArgument, "space.large_size_enabled", "Unexpected argument \"space.large_size_enabled\".")
	}
	return nil
}

// volumeSpec is a validated volume create.
type volumeSpec struct {
	Name            string
	SVM             *svmState
	Aggregate       string // name or uuid as given
	AggregateIsUUID bool
	Size            int64
	State           string
	Type            string
	Comment         string
	Guarantee       string
	SnapshotPolicy  string
	SnapdirAccess   bool
	JunctionPath    string
	SecurityStyle   string
	UnixPermissions int
	UID, GID        int
	LargeSize       bool   // space.large_size_enabled
	ExportPolicy    string // name; "" = default
	ExportPolicyID  int64  // alternative to the name
	ReservePercent  int
	Language        string
	TieringPolicy   string
	Encryption      bool
	QoSPolicy       string
	AutosizeMode    string
}

func parseVolumeSpec(b *bodyReader, svm *svmState) (*volumeSpec, *apiError) {
	name, _ := b.str("name")
	if err := validateVolumeName(name, "name"); b.err == nil && err != nil {
		return nil, err
	}
	spec := &volumeSpec{
		Name: name, SVM: svm, Size: minVolumeSize, State: "online", Type: "rw", Guarantee: "volume",
		SnapshotPolicy: "default", SnapdirAccess: true, SecurityStyle: "unix", UnixPermissions: 755,
		ReservePercent: 5, Language: "c.utf_8", TieringPolicy: "none", AutosizeMode: "off",
	}
	if err := spec.readAggregate(b); err != nil {
		return nil, err
	}
	spec.LargeSize, _ = b.boolean("space.large_size_enabled")
	if size, ok := b.size("size"); ok {
		spec.Size = roundUp4K(size)
		if err := checkVolumeSize(spec.Size, spec.LargeSize); err != nil {
			return nil, err
		}
	}
	if v, ok := b.enum("state", "online", "offline", "restricted"); ok {
		spec.State = v
	}
	if v, ok := b.enum("type", "rw", "dp", "ls"); ok {
		spec.Type = v
	}
	if v, ok := b.str("comment"); ok {
		if len(v) > 1023 {
			return nil, errInvalid(codeInvalidValue, "comment", "The value for field \"comment\" is too long (maximum 1023 characters).")
		}
		spec.Comment = v
	}
	if v, ok := b.enum("guarantee.type", "volume", "none"); ok {
		spec.Guarantee = v
	}
	if v, ok := b.str("snapshot_policy.name"); ok {
		spec.SnapshotPolicy = v
	} else if u, ok := b.str("snapshot_policy.uuid"); ok {
		spec.SnapshotPolicy = u // resolved in the job
	}
	if v, ok := b.boolean("snapshot_directory_access_enabled"); ok {
		spec.SnapdirAccess = v
	}
	nas, err := readVolumeNAS(b)
	if err != nil {
		return nil, err
	}
	spec.setNAS(nas)
	if v, ok := b.integer("space.snapshot.reserve_percent"); ok {
		if v < 0 || v > 90 {
			return nil, errInvalid(codeReserveTooLarge, "space.snapshot.reserve_percent", "The snapshot reserve must be between 0 and 90 percent when creating a volume.")
		}
		spec.ReservePercent = int(v)
	}
	if v, ok := b.str("language"); ok {
		spec.Language = strings.ToLower(v)
	}
	if v, ok := b.enum("tiering.policy", "all", "auto", "none", "snapshot_only", "backup"); ok {
		spec.TieringPolicy = v
	}
	if v, ok := b.boolean("encryption.enabled"); ok {
		spec.Encryption = v
	}
	if v, ok := b.str("qos.policy.name"); ok {
		spec.QoSPolicy = v
	}
	if v, ok := b.enum("autosize.mode", "grow", "grow_shrink", "off"); ok {
		spec.AutosizeMode = v
	}
	if b.err != nil {
		return nil, b.err
	}
	return spec, nil
}

// readAggregate reads the one aggregate of a FlexVol create.
func (spec *volumeSpec) readAggregate(b *bodyReader) *apiError {
	aggrs, hasAggrs := b.objects("aggregates")
	style, hasStyle := b.enum("style", "flexvol", "flexgroup")
	if b.err != nil {
		return b.err
	}
	switch {
	case hasStyle && style == "flexgroup", len(aggrs) > 1:
		return errInvalid(codeNotSupported, "style", "FlexGroup volumes are not supported by the simulator; specify exactly one aggregate.")
	case !hasAggrs || len(aggrs) == 0:
		return errInvalid(codeNeedAggregates, "aggregates", "Either \"aggregates\" or \"style\" must be specified to create a FlexVol volume.")
	}
	if n, ok := aggrs[0].str("name"); ok {
		spec.Aggregate = n
	} else if u, ok := aggrs[0].str("uuid"); ok {
		spec.Aggregate, spec.AggregateIsUUID = u, true
	}
	b.sub(aggrs[0])
	if spec.Aggregate == "" && b.err == nil {
		return errInvalid(codeMissingRequired, "aggregates.name", "Request missing required value \"aggregates.name\".")
	}
	return nil
}

// setNAS takes the nas.* fields that were given.
func (spec *volumeSpec) setNAS(n volumeNAS) {
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	set(&spec.JunctionPath, n.JunctionPath)
	set(&spec.SecurityStyle, n.SecurityStyle)
	if n.UnixPerms != nil {
		spec.UnixPermissions = *n.UnixPerms
	}
	if n.UID != nil {
		spec.UID = *n.UID
	}
	if n.GID != nil {
		spec.GID = *n.GID
	}
	set(&spec.ExportPolicy, n.ExportPolicy)
	if n.ExportPolicyID != nil {
		spec.ExportPolicyID = *n.ExportPolicyID
	}
}

func (s *Simulator) postVolume(c *call) (*reply, *apiError) {
	b := c.body
	if err := c.checkBody(volumePostFields, volumeResource); err != nil {
		return nil, err
	}
	svm, err := c.resolveSVM(b, true)
	if err != nil {
		return nil, err
	}
	name, _ := b.str("name")
	if b.err != nil {
		return nil, b.err
	}
	if err := validateVolumeName(name, "name"); err != nil {
		return nil, err
	}
	isClone := b.has("clone.parent_volume") || b.has("clone.parent_snapshot")
	if v, ok := b.boolean("clone.is_flexclone"); ok && v && !isClone {
		return nil, errInvalid(codeMissingRequired, "clone.parent_volume", "Request missing required value \"clone.parent_volume\".")
	}
	var spec *volumeSpec
	var clone *cloneSpec
	if isClone {
		clone, err = parseCloneSpec(b, svm, name)
	} else {
		spec, err = parseVolumeSpec(b, svm)
	}
	if err == nil {
		err = s.checkLargeSize(b.has("space.large_size_enabled"))
	}
	if err != nil {
		return nil, err
	}
	return s.startVolumeCreate(c, svm, name, spec, clone)
}

// startVolumeCreate starts the job of a volume create (spec) or clone
// create (clone) of name. One create wins per name: the name is reserved
// until the job ends (docs/design/ontap-rest.md §7, point 3).
func (s *Simulator) startVolumeCreate(c *call, svm *svmState, name string, spec *volumeSpec, clone *cloneSpec) (*reply, *apiError) {
	key := svm.UUID + "/" + name
	var dup *apiError
	switch {
	case s.m.volumeByName(svm.UUID, name) != nil:
		dup = errConflict(codeVolDuplicate, "name", "Duplicate volume name %q.", name)
	case s.creating[key] != "":
		dup = errConflict(codeVolBeingCreated, "name", "Another volume with the name %q is being created.", name)
	}
	if dup != nil && s.cfg.SyncDuplicateCheck {
		return nil, dup
	}
	location := "/api/storage/volumes/?name=" + name
	record := map[string]any{"name": name, "svm": map[string]any{"name": svm.Name, "uuid": svm.UUID}}
	if dup != nil {
		j := s.startJob(c, svm, s.draw(s.cfg.Latency.VolumeCreate), func() *apiError { return dup }, nil)
		return asyncReply(j, location, record), nil
	}
	var j *job
	release := func() {
		if s.creating[key] == j.UUID {
			delete(s.creating, key)
		}
	}
	if clone != nil {
		j = s.startJob(c, svm, s.draw(s.cfg.Latency.CloneCreate), func() *apiError {
			_, err := s.createClone(clone)
			return err
		}, release)
	} else {
		j = s.startJob(c, svm, s.draw(s.cfg.Latency.VolumeCreate), func() *apiError {
			_, err := s.createVolume(spec)
			return err
		}, release)
	}
	s.creating[key] = j.UUID
	return asyncReply(j, location, record), nil
}

// createVolume applies a volume create (the job's commit, and fixtures).
// Called with mu held.
func (s *Simulator) createVolume(spec *volumeSpec) (*volumeState, *apiError) {
	m := s.m
	svm := spec.SVM
	if m.volumeByName(svm.UUID, spec.Name) != nil {
		return nil, errConflict(codeVolDuplicate, "name", "Duplicate volume name %q.", spec.Name)
	}
	var aggr *aggrState
	if spec.AggregateIsUUID {
		aggr = m.aggr(spec.Aggregate)
	} else {
		aggr = m.aggrByName(spec.Aggregate)
	}
	if aggr == nil || !contains(svm.Aggregates, aggr.UUID) {
		return nil, errNotFound(codeAggrNotFound, "aggregates", "Aggregate %q does not exist or is not assigned to SVM %q.", spec.Aggregate, svm.Name)
	}
	sp := m.snapPolicyByName(spec.SnapshotPolicy)
	if sp == nil {
		for _, p := range m.SnapshotPolicies {
			if p.UUID == spec.SnapshotPolicy {
				sp = p
			}
		}
	}
	if sp == nil {
		return nil, errNotFound(codeSnapPolicyNotFound, "snapshot_policy", "Snapshot policy %q does not exist.", spec.SnapshotPolicy)
	}
	pol, err := s.findPolicy(svm, spec.ExportPolicy, spec.ExportPolicyID)
	if err != nil {
		return nil, err
	}
	qos, err := s.resolveQoS(svm.UUID, spec.QoSPolicy, "qos.policy.name")
	if err != nil {
		return nil, err
	}
	v := &volumeState{
		UUID: newUUID(), Name: spec.Name, SVM: svm.UUID, Aggregate: aggr.UUID, Size: spec.Size,
		State: spec.State, Type: spec.Type, Comment: spec.Comment, CreateTime: time.Now(),
		Guarantee: spec.Guarantee, SnapshotPolicy: sp.Name, SnapdirAccess: spec.SnapdirAccess,
		SecurityStyle: spec.SecurityStyle, UnixPermissions: spec.UnixPermissions, UID: spec.UID, GID: spec.GID,
		ExportPolicy: pol.ID, ReservePercent: spec.ReservePercent, Language: spec.Language,
		TieringPolicy: spec.TieringPolicy, Encryption: spec.Encryption, QoSPolicy: qos,
		AutosizeMode: spec.AutosizeMode, LargeSize: spec.LargeSize,
	}
	if v.Guarantee == "volume" {
		u := s.newUsage()
		if avail := u.aggrAvailable(aggr); avail < v.Size {
			return nil, errAggrSpace(m, "create", v, aggr, v.Size, avail)
		}
	}
	if spec.JunctionPath != "" {
		if err := s.checkJunction(v, spec.JunctionPath); err != nil {
			return nil, err
		}
		v.JunctionPath = spec.JunctionPath
	}
	if err := s.createVolumeDir(v); err != nil {
		return nil, newError(http.StatusInternalServerError, codeJobFailed, "", "Failed to create the volume backing directory: %v", err)
	}
	m.Volumes[v.UUID] = v
	return v, nil
}

// findPolicy resolves an export policy by name or id ("" and 0 = default).
func (s *Simulator) findPolicy(svm *svmState, name string, id int64) (*policyState, *apiError) {
	var p *policyState
	switch {
	case id != 0:
		p = s.m.ExportPolicies[id]
		if p != nil && p.SVM != svm.UUID {
			p = nil
		}
	case name != "":
		p = s.m.policyByName(svm.UUID, name)
	default:
		p = s.m.policyByName(svm.UUID, "default")
	}
	if p == nil {
		what := name
		if id != 0 {
			what = itoa64(id)
		}
		return nil, errNotFound(codeExportPolicyBad, "nas.export_policy", "Failed to get a valid export policy: export policy %q does not exist in SVM %q.", what, svm.Name)
	}
	return p, nil
}

// resolvePath maps an SVM namespace path to the volume whose junction is
// its longest prefix, and the path inside that volume ("" for the root).
func (m *model) resolvePath(svm, p string) (*volumeState, string) {
	var best *volumeState
	bestLen := -1
	lp := strings.ToLower(p)
	for _, v := range m.Volumes {
		if v.SVM != svm || v.JunctionPath == "" || v.State != "online" {
			continue
		}
		j := strings.ToLower(v.JunctionPath)
		if lp == j || j == "/" || strings.HasPrefix(lp, j+"/") {
			if len(j) > bestLen {
				best, bestLen = v, len(j)
			}
		}
	}
	if best == nil {
		return nil, ""
	}
	rel := strings.TrimPrefix(p[bestLen:], "/")
	if best.JunctionPath == "/" {
		rel = strings.TrimPrefix(p, "/")
	}
	return best, rel
}

// checkJunction verifies that v can be mounted at p (docs/design/ontap-rest.md §4.4): v online, p
// unused in the SVM (case-insensitive), and p's parent an existing
// directory of a mounted volume.
func (s *Simulator) checkJunction(v *volumeState, p string) *apiError {
	if v.State != "online" {
		return errInvalid(codeVolNotOnline, "nas.path", "Volume %q is not online; it cannot be mounted.", v.Name)
	}
	if other := s.m.volumeAtJunction(v.SVM, p); other != nil && other != v {
		return errInvalid(codeJunctionInvalid, "nas.path", "Junction path %q is already used by volume %q.", p, other.Name)
	}
	parent := path.Dir(p)
	pv, rel := s.m.resolvePath(v.SVM, parent)
	if pv == nil || pv == v {
		return errInvalid(codeJunctionInvalid, "nas.path", "The parent %q of junction path %q does not exist.", parent, p)
	}
	if rel != "" {
		dir, ok := confine(s.volumeDir(pv.UUID), rel)
		if fi, err := os.Stat(dir); !ok || err != nil || !fi.IsDir() {
			return errInvalid(codeJunctionInvalid, "nas.path", "The parent %q of junction path %q does not exist.", parent, p)
		}
	}
	return nil
}

// confine joins rel below root and refuses anything escaping root.
func confine(root, rel string) (string, bool) {
	p := filepath.Join(root, filepath.FromSlash(path.Clean("/"+rel)))
	if p != root && !strings.HasPrefix(p, root+string(filepath.Separator)) {
		return "", false
	}
	return p, true
}

// ---- FlexClone ----

type cloneSpec struct {
	Name         string
	SVM          *svmState
	ParentVolume string
	ParentIsUUID bool
	ParentSnap   string
	SnapIsUUID   bool
	Comment      string
	JunctionPath string
	ExportPolicy string
	ExportPolID  int64
	QoSPolicy    string
	SnapPolicy   string
	Guarantee    string
	State        string
}

func parseCloneSpec(b *bodyReader, svm *svmState, name string) (*cloneSpec, *apiError) {
	for _, p := range leafPaths(b.m) {
		if !cloneCreateFields[p] {
			return nil, errInvalid(codeCloneBadValue, p, "The field %q is not valid when creating a FlexClone volume.", p)
		}
	}
	cs := &cloneSpec{Name: name, SVM: svm}
	if n, ok := b.str("clone.parent_volume.name"); ok {
		cs.ParentVolume = n
	} else if u, ok := b.str("clone.parent_volume.uuid"); ok {
		cs.ParentVolume, cs.ParentIsUUID = u, true
	} else if b.err == nil {
		return nil, errInvalid(codeMissingRequired, "clone.parent_volume", "Request missing required value \"clone.parent_volume\".")
	}
	if n, ok := b.str("clone.parent_snapshot.name"); ok {
		cs.ParentSnap = n
	} else if u, ok := b.str("clone.parent_snapshot.uuid"); ok {
		cs.ParentSnap, cs.SnapIsUUID = u, true
	}
	if n, ok := b.str("clone.parent_svm.name"); ok && n != svm.Name {
		return nil, errInvalid(codeCloneBadValue, "clone.parent_svm", "Cloning from another SVM is not supported by the simulator.")
	}
	if v, ok := b.str("comment"); ok {
		cs.Comment = v
	}
	if v, ok := b.str("nas.path"); ok {
		if err := validateJunctionSyntax(v); err != nil {
			return nil, err
		}
		cs.JunctionPath = v
	}
	if v, ok := b.str("nas.export_policy.name"); ok {
		cs.ExportPolicy = v
	} else if id, ok := b.integer("nas.export_policy.id"); ok {
		cs.ExportPolID = id
	}
	if v, ok := b.str("qos.policy.name"); ok {
		cs.QoSPolicy = v
	}
	if v, ok := b.str("snapshot_policy.name"); ok {
		cs.SnapPolicy = v
	}
	if v, ok := b.enum("guarantee.type", "volume", "none"); ok {
		cs.Guarantee = v
	}
	if v, ok := b.enum("state", "online", "offline", "restricted"); ok {
		cs.State = v
	}
	if b.err != nil {
		return nil, b.err
	}
	return cs, nil
}

// leafPaths lists the dotted leaf paths of a body (arrays transparent).
func leafPaths(m map[string]any) []string {
	var out []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch t := v.(type) {
		case map[string]any:
			if len(t) == 0 && prefix != "" {
				out = append(out, prefix)
			}
			for k, c := range t {
				p := k
				if prefix != "" {
					p = prefix + "." + k
				}
				walk(p, c)
			}
		case []any:
			for _, e := range t {
				if _, ok := e.(map[string]any); ok {
					walk(prefix, e)
				} else {
					out = append(out, prefix)
					return
				}
			}
		default:
			out = append(out, prefix)
		}
	}
	walk("", m)
	return out
}

// createClone creates a FlexClone from a parent snapshot (taking one named
// "clone_<name>.<time>.0" when none is given). The clone's LUNs are new,
// unmapped LUNs with new serials (docs/design/ontap-rest.md §4.1 belief). Called with mu held.
func (s *Simulator) createClone(cs *cloneSpec) (*volumeState, *apiError) {
	m := s.m
	if m.volumeByName(cs.SVM.UUID, cs.Name) != nil {
		return nil, errConflict(codeVolDuplicate, "name", "Duplicate volume name %q.", cs.Name)
	}
	parent, snap, err := s.cloneSource(cs)
	if err != nil {
		return nil, err
	}
	exportPolicy := parent.ExportPolicy // a clone inherits the parent's policy unless told otherwise
	if cs.ExportPolicy != "" || cs.ExportPolID != 0 {
		pol, err := s.findPolicy(cs.SVM, cs.ExportPolicy, cs.ExportPolID)
		if err != nil {
			return nil, err
		}
		exportPolicy = pol.ID
	}
	v := *parent
	v.UUID, v.Name, v.CreateTime = newUUID(), cs.Name, time.Now()
	v.CloneParent, v.CloneParentSnap, v.SplitInitiated = parent.UUID, snap.UUID, false
	v.JunctionPath, v.Snapshots, v.IsSVMRoot, v.Comment = "", nil, false, cs.Comment
	v.ExportPolicy = exportPolicy
	if cs.QoSPolicy != "" {
		qos, err := s.resolveQoS(v.SVM, cs.QoSPolicy, "qos.policy.name")
		if err != nil {
			return nil, err
		}
		v.QoSPolicy = qos
	}
	if cs.SnapPolicy != "" {
		if m.snapPolicyByName(cs.SnapPolicy) == nil {
			return nil, errNotFound(codeSnapPolicyNotFound, "snapshot_policy", "Snapshot policy %q does not exist.", cs.SnapPolicy)
		}
		v.SnapshotPolicy = cs.SnapPolicy
	}
	if cs.Guarantee != "" {
		v.Guarantee = cs.Guarantee
	}
	if cs.State != "" {
		v.State = cs.State
	}
	if cs.JunctionPath != "" {
		if err := s.checkJunction(&v, cs.JunctionPath); err != nil {
			return nil, err
		}
		v.JunctionPath = cs.JunctionPath
	}
	luns, err := s.cloneData(&v, snap)
	if err != nil {
		return nil, err
	}
	m.Volumes[v.UUID] = &v
	for _, l := range luns {
		m.LUNs[l.UUID] = l
	}
	return &v, nil
}

// cloneSource finds the parent of a clone and the snapshot it is made from,
// taking a new snapshot of the parent when the spec names none.
func (s *Simulator) cloneSource(cs *cloneSpec) (*volumeState, *snapshotState, *apiError) {
	m := s.m
	var parent *volumeState
	if cs.ParentIsUUID {
		parent = m.Volumes[cs.ParentVolume]
	} else {
		parent = m.volumeByName(cs.SVM.UUID, cs.ParentVolume)
	}
	if parent == nil || parent.SVM != cs.SVM.UUID {
		return nil, nil, errNotFound(codeParentVolNotFound, "clone.parent_volume", "Parent volume %q does not exist.", cs.ParentVolume)
	}
	if parent.State != "online" {
		return nil, nil, newError(http.StatusConflict, codeCloneFailed, "clone.parent_volume", "Failed to create clone volume: parent volume %q is not online.", parent.Name)
	}
	var snap *snapshotState
	if cs.ParentSnap != "" {
		if cs.SnapIsUUID {
			snap = parent.snapshot(cs.ParentSnap)
		} else {
			snap = parent.snapshotByName(cs.ParentSnap)
		}
		if snap == nil {
			return nil, nil, errNotFound(codeSnapNotFound, "clone.parent_snapshot", "Snapshot %q does not exist in volume %q.", cs.ParentSnap, parent.Name)
		}
	} else {
		var err *apiError
		snap, err = s.createSnapshot(parent, fmt.Sprintf("clone_%s.%s.0", cs.Name, time.Now().Format("2006-01-02_150405")), "")
		if err != nil {
			return nil, nil, err
		}
	}
	return parent, snap, nil
}

// cloneData copies the snapshot's files and LUNs into the new clone v and
// returns its LUNs, not yet in the model.
func (s *Simulator) cloneData(v *volumeState, snap *snapshotState) ([]*lunState, *apiError) {
	fail := func(err error) *apiError {
		os.RemoveAll(s.volumeDir(v.UUID))
		return newError(http.StatusInternalServerError, codeCloneFailed, "", "Failed to create clone volume: %v", err)
	}
	if err := os.MkdirAll(s.volumeDir(v.UUID), 0o755); err != nil {
		return nil, fail(err)
	}
	if err := copyTree(filepath.Join(s.snapshotDir(snap.UUID), "data"), s.volumeDir(v.UUID)); err != nil {
		return nil, fail(err)
	}
	if fi, err := os.Stat(filepath.Join(s.snapshotDir(snap.UUID), "data")); err == nil {
		os.Chmod(s.volumeDir(v.UUID), fi.Mode())
	}
	var luns []*lunState
	for _, sl := range snap.LUNs {
		l := &lunState{
			UUID: newUUID(), Volume: v.UUID, Leaf: sl.Leaf, SVM: v.SVM, Size: sl.Size, OSType: sl.OSType,
			Serial: s.newSerial(), Reserved: sl.Reserved, Comment: sl.Comment, Enabled: true, CreateTime: time.Now(),
			Attributes: append([]lunAttr(nil), sl.Attributes...),
		}
		if err := copyFileSparse(s.snapshotLUNFile(snap.UUID, sl.UUID), s.lunFile(l.UUID), 0o600); err != nil {
			for _, done := range luns {
				os.Remove(s.lunFile(done.UUID))
			}
			return nil, fail(err)
		}
		luns = append(luns, l)
	}
	return luns, nil
}

// ---- GET ----

func (s *Simulator) renderVolume(u *usage, v *volumeState) map[string]any {
	m := s.m
	svm := m.svm(v.SVM)
	rec := map[string]any{
		"size": v.Size, "state": v.State, "type": v.Type,
		"create_time": formatTime(v.CreateTime), "language": v.Language,
		"guarantee":                         map[string]any{"type": v.Guarantee, "honored": true},
		"snapshot_directory_access_enabled": v.SnapdirAccess,
		"tiering":                           map[string]any{"policy": v.TieringPolicy},
		"snapshot_count":                    len(v.Snapshots),
		"is_svm_root":                       v.IsSVMRoot,
		"encryption":                        map[string]any{"enabled": v.Encryption, "state": map[bool]string{true: "encrypted", false: "none"}[v.Encryption], "type": map[bool]string{true: "volume", false: "none"}[v.Encryption]},
		"autosize":                          map[string]any{"mode": v.AutosizeMode, "maximum": v.Size * 6 / 5, "minimum": v.Size, "grow_threshold": 85, "shrink_threshold": 50},
		"_links":                            selfLink("/api/storage/volumes/" + v.UUID),
	}
	s.volumeKeys(v, rec, map[string]any{})
	if a := m.aggr(v.Aggregate); a != nil {
		rec["aggregates"] = []any{map[string]any{"name": a.Name, "uuid": a.UUID}}
	}
	if v.Comment != "" {
		rec["comment"] = v.Comment
	}
	if sp := m.snapPolicyByName(v.SnapshotPolicy); sp != nil {
		rec["snapshot_policy"] = map[string]any{"name": sp.Name, "uuid": sp.UUID}
	}
	nas := map[string]any{
		"security_style": v.SecurityStyle, "unix_permissions": v.UnixPermissions, "uid": v.UID, "gid": v.GID,
	}
	if p := m.ExportPolicies[v.ExportPolicy]; p != nil {
		nas["export_policy"] = map[string]any{"name": p.Name, "id": p.ID}
	}
	if v.JunctionPath != "" {
		nas["path"] = v.JunctionPath
		if v.JunctionPath != "/" {
			if pv, _ := m.resolvePath(v.SVM, path.Dir(v.JunctionPath)); pv != nil {
				nas["junction_parent"] = map[string]any{"name": pv.Name, "uuid": pv.UUID}
			}
		}
	}
	rec["nas"] = nas
	if v.QoSPolicy != "" {
		rec["qos"] = map[string]any{"policy": map[string]any{"name": v.QoSPolicy}}
	}

	used := u.volumeUsed(v)
	afs := afsTotal(v)
	avail := u.volumeAvailable(v)
	reserve := v.Size - afs
	pct := func(a, b int64) int64 {
		if b <= 0 {
			return 0
		}
		return a * 100 / b
	}
	over := int64(0)
	if v.Guarantee != "volume" || v.CloneParent != "" {
		over = max(0, afs-used-avail)
	}
	rec["space"] = map[string]any{
		"size": v.Size, "available": avail, "used": used, "afs_total": afs, "large_size_enabled": v.LargeSize,
		"available_percent": pct(avail, afs), "percent_used": pct(used, afs),
		"footprint": u.footprint(v), "over_provisioned": over, "physical_used": used,
		"logical_space": map[string]any{
			"used": used, "available": avail, "used_by_afs": used, "used_percent": pct(used, afs),
			"reporting": false, "enforcement": false,
		},
		"snapshot": map[string]any{
			"reserve_percent": v.ReservePercent, "reserve_size": reserve, "reserve_available": reserve,
			"used": 0, "space_used_percent": 0, "autodelete_enabled": false,
		},
	}
	clone := map[string]any{
		"is_flexclone":  v.CloneParent != "",
		"has_flexclone": len(m.clonesOf(v.UUID, "")) > 0,
	}
	if v.CloneParent != "" {
		if pv := m.Volumes[v.CloneParent]; pv != nil {
			clone["parent_volume"] = map[string]any{"name": pv.Name, "uuid": pv.UUID}
			if sn := pv.snapshot(v.CloneParentSnap); sn != nil {
				clone["parent_snapshot"] = map[string]any{"name": sn.Name, "uuid": sn.UUID}
			}
		}
		if svm != nil {
			clone["parent_svm"] = map[string]any{"name": svm.Name, "uuid": svm.UUID}
		}
		clone["split_initiated"] = v.SplitInitiated
		clone["split_complete_percent"] = 0
		clone["split_estimate"] = used
	}
	rec["clone"] = clone
	s.renderVolumeQuota(v, rec)
	return rec
}

func (s *Simulator) getVolumes(c *call) (*reply, *apiError) {
	s.purgeRecoveryQueue()
	vols := slices.Collect(maps.Values(s.m.Volumes))
	keys, svm := map[string]any{}, map[string]any{}
	return c.listByKeys(volumeResource, len(vols),
		func(i int) map[string]any { return s.volumeKeys(vols[i], keys, svm) },
		func(i int) map[string]any { return s.renderVolume(c.usage(), vols[i]) })
}

// volumeKeys sets into rec the fields a volume lookup selects by (name,
// UUID, SVM, style) as renderVolume renders them, the SVM's into svm.
func (s *Simulator) volumeKeys(v *volumeState, rec, svm map[string]any) map[string]any {
	rec["uuid"], rec["name"], rec["style"] = v.UUID, v.Name, "flexvol"
	delete(rec, "svm")
	if sv := s.m.svm(v.SVM); sv != nil {
		svm["name"], svm["uuid"] = sv.Name, sv.UUID
		rec["svm"] = svm
	}
	return rec
}

func (c *call) volume(param string) (*volumeState, *apiError) {
	v := c.m.Volumes[c.params[param]]
	if v == nil {
		return nil, errNotFound(codeNotFound, "uuid", "entry doesn't exist")
	}
	return v, nil
}

func (s *Simulator) getVolume(c *call) (*reply, *apiError) {
	v, err := c.volume("uuid")
	if err != nil {
		return nil, err
	}
	return c.instance(volumeResource, s.renderVolume(c.usage(), v))
}

// ---- PATCH ----

// volumePatch is a validated volume modify; nil fields are unchanged.
type volumePatch struct {
	Name           *string
	Size           *int64
	State          *string
	Comment        *string
	SnapshotPolicy *string
	SnapdirAccess  *bool
	volumeNAS
	ReservePercent *int
	TieringPolicy  *string
	QoSPolicy      *string
	AutosizeMode   *string
	Guarantee      *string
	LargeSize      *bool
	Split          *bool
	QuotaEnabled   *bool
	RestoreSnap    string
	RestoreIsUUID  bool
}

func ptr[T any](v T) *T { return &v }

func (s *Simulator) patchVolume(c *call) (*reply, *apiError) {
	v, err := c.volume("uuid")
	if err != nil {
		return nil, err
	}
	p, err := parseVolumePatch(c)
	if err != nil {
		return nil, err
	}
	if p.Split != nil && *p.Split && v.CloneParent == "" {
		return nil, errInvalid(codeInvalidValue, "clone.split_initiated", "Volume %q is not a FlexClone volume.", v.Name)
	}
	svm := s.m.svm(v.SVM)
	dur := s.draw(s.cfg.Latency.VolumePatch)
	if p.Split != nil && *p.Split {
		v.SplitInitiated = true
		dur = s.draw(s.cfg.Latency.CloneSplit)
	}
	id := v.UUID
	j := s.startJob(c, svm, dur, func() *apiError {
		cur := s.m.Volumes[id]
		if cur == nil {
			return errNotFound(codeNotFound, "uuid", "entry doesn't exist")
		}
		return s.modifyVolume(cur, p)
	}, func() {
		if cur := s.m.Volumes[id]; cur != nil && cur.CloneParent != "" {
			cur.SplitInitiated = false
		}
	})
	return asyncReply(j, ""), nil
}

// parseVolumePatch reads the query and body of a volume PATCH.
func parseVolumePatch(c *call) (*volumePatch, *apiError) {
	b := c.body
	p := &volumePatch{}
	if n := c.q.Get("restore_to.snapshot.name"); n != "" {
		p.RestoreSnap = n
	} else if u := c.q.Get("restore_to.snapshot.uuid"); u != "" {
		p.RestoreSnap, p.RestoreIsUUID = u, true
	}
	if p.RestoreSnap != "" {
		if err := c.checkBody(volumePatchFields, volumeResource); err != nil {
			return nil, err
		}
	} else if err := c.patchBody(volumePatchFields, volumeResource); err != nil {
		return nil, err
	}
	if n, ok := b.str("name"); ok {
		if err := validateVolumeName(n, "name"); err != nil {
			return nil, err
		}
		p.Name = &n
	}
	if l, ok := b.boolean("space.large_size_enabled"); ok {
		p.LargeSize = &l
	}
	if size, ok := b.size("size"); ok {
		// The 100 TiB bound depends on the volume: checkVolumePatch.
		size = roundUp4K(size)
		if err := checkVolumeSize(size, true); err != nil {
			return nil, err
		}
		p.Size = &size
	}
	if st, ok := b.enum("state", "online", "offline", "restricted"); ok {
		p.State = &st
	}
	if cm, ok := b.str("comment"); ok {
		if len(cm) > 1023 {
			return nil, errInvalid(codeInvalidValue, "comment", "The value for field \"comment\" is too long (maximum 1023 characters).")
		}
		p.Comment = &cm
	}
	if sp, ok := b.str("snapshot_policy.name"); ok {
		p.SnapshotPolicy = &sp
	}
	if sd, ok := b.boolean("snapshot_directory_access_enabled"); ok {
		p.SnapdirAccess = &sd
	}
	var err *apiError
	if p.volumeNAS, err = readVolumeNAS(b); err != nil {
		return nil, err
	}
	if rp, ok := b.integer("space.snapshot.reserve_percent"); ok {
		if rp < 0 || rp > 100 {
			return nil, errInvalid(codeInvalidValue, "space.snapshot.reserve_percent", "The snapshot reserve must be between 0 and 100 percent.")
		}
		p.ReservePercent = ptr(int(rp))
	}
	if tp, ok := b.enum("tiering.policy", "all", "auto", "none", "snapshot_only", "backup"); ok {
		p.TieringPolicy = &tp
	}
	if q, ok := b.str("qos.policy.name"); ok {
		p.QoSPolicy = &q
	}
	if am, ok := b.enum("autosize.mode", "grow", "grow_shrink", "off"); ok {
		p.AutosizeMode = &am
	}
	if g, ok := b.enum("guarantee.type", "volume", "none"); ok {
		p.Guarantee = &g
	}
	if sp, ok := b.boolean("clone.split_initiated"); ok {
		p.Split = &sp
	}
	if qe, ok := b.boolean("quota.enabled"); ok {
		p.QuotaEnabled = &qe
	}
	if b.err != nil {
		return nil, b.err
	}
	return p, nil
}

// volumeNAS holds the nas.* fields of a volume create or PATCH; nil fields
// were not given.
type volumeNAS struct {
	JunctionPath   *string
	SecurityStyle  *string
	UnixPerms      *int
	UID, GID       *int
	ExportPolicy   *string
	ExportPolicyID *int64
}

// readVolumeNAS reads the nas.* fields of a volume create or PATCH.
func readVolumeNAS(b *bodyReader) (volumeNAS, *apiError) {
	var n volumeNAS
	if jp, ok := b.str("nas.path"); ok {
		if err := validateJunctionSyntax(jp); err != nil {
			return n, err
		}
		n.JunctionPath = &jp
	}
	if ss, ok := b.enum("nas.security_style", "unix", "ntfs", "mixed", "unified"); ok {
		n.SecurityStyle = &ss
	}
	if up, ok := b.integer("nas.unix_permissions"); ok {
		if !permDigits.MatchString(fmt.Sprint(up)) {
			return n, errInvalid(codeInvalidValue, "nas.unix_permissions", "The value \"%d\" is invalid for field \"nas.unix_permissions\" (octal digits, e.g. 755).", up)
		}
		n.UnixPerms = ptr(int(up))
	}
	if id, ok := b.integer("nas.uid"); ok {
		n.UID = ptr(int(id))
	}
	if id, ok := b.integer("nas.gid"); ok {
		n.GID = ptr(int(id))
	}
	if ep, ok := b.str("nas.export_policy.name"); ok {
		n.ExportPolicy = &ep
	} else if id, ok := b.integer("nas.export_policy.id"); ok {
		n.ExportPolicyID = &id
	}
	return n, nil
}

// modifyVolume checks every change of p first and then applies them all,
// so a failing job changes nothing. Called with mu held.
func (s *Simulator) modifyVolume(v *volumeState, p *volumePatch) *apiError {
	ch, err := s.checkVolumePatch(v, p)
	if err != nil {
		return err
	}
	return s.applyVolumePatch(v, p, ch)
}

// volumeChange is what a volume patch resolves to once checked.
type volumeChange struct {
	restore    *snapshotState
	snapPolicy *snapPolicyState
	policy     *policyState
	state      string
	size       int64
	guarantee  string
	large      bool
	splitting  bool
	junction   *string
	qos        *string // "" takes the volume out of its policy group
}

// checkVolumePatch checks p against v and the objects it names.
func (s *Simulator) checkVolumePatch(v *volumeState, p *volumePatch) (*volumeChange, *apiError) {
	m := s.m
	if p.Name != nil && *p.Name != v.Name && m.volumeByName(v.SVM, *p.Name) != nil {
		return nil, errConflict(codeVolDuplicate, "name", "Duplicate volume name %q.", *p.Name)
	}
	ch := &volumeChange{state: v.State, size: v.Size, guarantee: v.Guarantee, large: v.LargeSize, splitting: p.Split != nil && *p.Split}
	var err *apiError
	if ch.restore, err = s.restoreTarget(v, p); err != nil {
		return nil, err
	}
	if p.SnapshotPolicy != nil {
		if ch.snapPolicy = m.snapPolicyByName(*p.SnapshotPolicy); ch.snapPolicy == nil {
			return nil, errNotFound(codeSnapPolicyNotFound, "snapshot_policy", "Snapshot policy %q does not exist.", *p.SnapshotPolicy)
		}
	}
	if p.ExportPolicy != nil || p.ExportPolicyID != nil {
		name, id := "", int64(0)
		if p.ExportPolicy != nil {
			name = *p.ExportPolicy
		} else {
			id = *p.ExportPolicyID
		}
		if ch.policy, err = s.findPolicy(m.svm(v.SVM), name, id); err != nil {
			return nil, err
		}
	}
	if ch.qos, err = s.resolveQoSChange(v.SVM, p.QoSPolicy, "qos.policy.name"); err != nil {
		return nil, err
	}
	if p.State != nil {
		ch.state = *p.State
	}
	if err := s.checkLargeSize(p.LargeSize != nil); err != nil {
		return nil, err
	}
	if p.LargeSize != nil {
		ch.large = *p.LargeSize
	}
	if p.Size != nil {
		ch.size = *p.Size
		if err := checkVolumeSize(ch.size, ch.large); err != nil {
			return nil, err
		}
	}
	if p.Guarantee != nil {
		ch.guarantee = *p.Guarantee
	}
	if err := s.checkPatchSpace(v, ch); err != nil {
		return nil, err
	}
	if ch.junction, err = s.checkPatchJunction(v, p, ch.state); err != nil {
		return nil, err
	}
	if ch.state != "online" && v.IsSVMRoot {
		return nil, errInvalid(codeInvalidValue, "state", "The SVM root volume cannot be taken offline.")
	}
	return ch, nil
}

// restoreTarget returns the snapshot a patch restores v to, nil if none.
func (s *Simulator) restoreTarget(v *volumeState, p *volumePatch) (*snapshotState, *apiError) {
	if p.RestoreSnap == "" {
		return nil, nil
	}
	var restore *snapshotState
	if p.RestoreIsUUID {
		restore = v.snapshot(p.RestoreSnap)
	} else {
		restore = v.snapshotByName(p.RestoreSnap)
	}
	if restore == nil {
		return nil, errNotFound(codeSnapNotFound, "restore_to.snapshot", "Snapshot %q does not exist in volume %q.", p.RestoreSnap, v.Name)
	}
	// ONTAP refuses a restore that would discard snapshots backing clones;
	// being conservative, any clone blocks it.
	for _, cl := range s.m.clonesOf(v.UUID, "") {
		if sn := v.snapshot(cl.CloneParentSnap); sn != nil && sn.CreateTime.After(restore.CreateTime) {
			return nil, errConflict(codeSnapBusy, "restore_to.snapshot", "Snapshot %q of volume %q is in use by FlexClone %q.", sn.Name, v.Name, cl.Name)
		}
	}
	return restore, nil
}

// checkPatchSpace fails a thick grow or split that the aggregate cannot
// hold.
func (s *Simulator) checkPatchSpace(v *volumeState, ch *volumeChange) *apiError {
	aggr := s.m.aggr(v.Aggregate)
	isClone := v.CloneParent != ""
	if ch.guarantee != "volume" || isClone && !ch.splitting || aggr == nil {
		return nil
	}
	u := s.newUsage()
	// What the new settings take from the aggregate beyond today's footprint.
	need := max(ch.size, u.volumeUsed(v)) - u.footprint(v)
	if avail := u.aggrAvailable(aggr); need > 0 && avail < need {
		what := "grow"
		if ch.splitting {
			what = "split"
		}
		return errAggrSpace(s.m, what, v, aggr, need, avail)
	}
	return nil
}

// checkPatchJunction checks a new junction path of v, which will be in
// state; nil when the patch sets none.
func (s *Simulator) checkPatchJunction(v *volumeState, p *volumePatch, state string) (*string, *apiError) {
	if p.JunctionPath == nil {
		return nil, nil
	}
	jp := *p.JunctionPath
	if v.IsSVMRoot && jp != "/" {
		return nil, errInvalid(codeJunctionInvalid, "nas.path", "The junction path of the SVM root volume cannot be changed.")
	}
	if jp != "" && jp != v.JunctionPath {
		tmp := *v
		tmp.State = state
		if err := s.checkJunction(&tmp, jp); err != nil {
			return nil, err
		}
	}
	return &jp, nil
}

// applyVolumePatch applies a checked patch.
func (s *Simulator) applyVolumePatch(v *volumeState, p *volumePatch, ch *volumeChange) *apiError {
	if ch.restore != nil {
		if err := s.restoreSnapshot(v, ch.restore); err != nil {
			return err
		}
	}
	if p.Name != nil {
		v.Name = *p.Name
	}
	v.Size = ch.size
	v.Guarantee = ch.guarantee
	v.LargeSize = ch.large
	if p.Comment != nil {
		v.Comment = *p.Comment
	}
	if ch.snapPolicy != nil {
		v.SnapshotPolicy = ch.snapPolicy.Name
	}
	if p.SnapdirAccess != nil {
		v.SnapdirAccess = *p.SnapdirAccess
	}
	if err := s.applyVolumePatchNAS(v, p, ch); err != nil {
		return err
	}
	if p.ReservePercent != nil {
		v.ReservePercent = *p.ReservePercent
	}
	if p.TieringPolicy != nil {
		v.TieringPolicy = *p.TieringPolicy
	}
	if ch.qos != nil {
		v.QoSPolicy = *ch.qos
	}
	if p.AutosizeMode != nil {
		v.AutosizeMode = *p.AutosizeMode
	}
	if ch.junction != nil {
		v.JunctionPath = *ch.junction
	}
	v.State = ch.state
	if ch.state != "online" {
		v.JunctionPath = "" // offline and restricted volumes lose their junction (docs/design/ontap-rest.md §3.5)
	}
	if ch.splitting {
		v.CloneParent, v.CloneParentSnap, v.SplitInitiated = "", "", false
	}
	if p.QuotaEnabled != nil {
		s.setVolumeQuota(v, *p.QuotaEnabled)
	}
	return nil
}

// applyVolumePatchNAS applies the export policy, security style and
// ownership of a checked patch.
func (s *Simulator) applyVolumePatchNAS(v *volumeState, p *volumePatch, ch *volumeChange) *apiError {
	if ch.policy != nil {
		v.ExportPolicy = ch.policy.ID
	}
	if p.SecurityStyle != nil {
		v.SecurityStyle = *p.SecurityStyle
	}
	if p.UnixPerms != nil {
		v.UnixPermissions = *p.UnixPerms
	}
	if p.UID != nil {
		v.UID = *p.UID
	}
	if p.GID != nil {
		v.GID = *p.GID
	}
	if p.UnixPerms != nil || p.UID != nil || p.GID != nil {
		if err := s.applyVolumeOwnership(v); err != nil {
			return newError(http.StatusInternalServerError, codeJobFailed, "", "Failed to apply permissions: %v", err)
		}
	}
	return nil
}

// restoreSnapshot makes the volume's data and LUNs those of the snapshot.
// LUNs created after the snapshot are deleted (with their maps); LUNs
// deleted since are re-created with new UUIDs, unmapped. Files are
// rewritten in place so mounts and loop devices stay valid.
func (s *Simulator) restoreSnapshot(v *volumeState, sn *snapshotState) *apiError {
	m := s.m
	fail := func(err error) *apiError {
		return newError(http.StatusInternalServerError, codeJobFailed, "", "Snapshot restore failed: %v", err)
	}
	dir := s.volumeDir(v.UUID)
	if err := clearDir(dir); err != nil {
		return fail(err)
	}
	if err := copyTree(filepath.Join(s.snapshotDir(sn.UUID), "data"), dir); err != nil {
		return fail(err)
	}
	for _, l := range m.lunsOfVolume(v.UUID) {
		if sn.lun(l.UUID) == nil {
			s.deleteLUNLocked(l)
		}
	}
	for _, sl := range sn.LUNs {
		l := m.LUNs[sl.UUID]
		if l == nil {
			l = &lunState{
				UUID: newUUID(), Volume: v.UUID, Leaf: sl.Leaf, SVM: v.SVM, OSType: sl.OSType,
				Serial: s.newSerial(), Enabled: true, CreateTime: time.Now(),
			}
			m.LUNs[l.UUID] = l
		}
		l.Size, l.Reserved, l.Comment = sl.Size, sl.Reserved, sl.Comment
		l.Attributes = append([]lunAttr(nil), sl.Attributes...)
		if err := copyFileSparse(s.snapshotLUNFile(sn.UUID, sl.UUID), s.lunFile(l.UUID), 0o600); err != nil {
			return fail(err)
		}
	}
	// Snapshots newer than the restored one are deleted, as on ONTAP.
	kept := v.Snapshots[:0]
	for _, other := range v.Snapshots {
		if other.CreateTime.After(sn.CreateTime) {
			os.RemoveAll(s.snapshotDir(other.UUID))
			continue
		}
		kept = append(kept, other)
	}
	v.Snapshots = kept
	return nil
}

// ---- DELETE ----

func (s *Simulator) deleteVolume(c *call) (*reply, *apiError) {
	v, err := c.volume("uuid")
	if err != nil {
		return nil, err
	}
	force := c.queryBool("force")
	s.purgeRecoveryQueue()
	id := v.UUID
	j := s.startJob(c, s.m.svm(v.SVM), s.draw(s.cfg.Latency.VolumeDelete), func() *apiError {
		cur := s.m.Volumes[id]
		if cur == nil {
			return errNotFound(codeNotFound, "uuid", "entry doesn't exist")
		}
		return s.destroyVolume(cur, force)
	}, nil)
	return asyncReply(j, ""), nil
}

// destroyVolume deletes a volume (docs/design/ontap-rest.md §3.5, §4.5): refused for the SVM root and
// while FlexClones depend on it; by default lenient about mounts and LUNs
// (implicit unmount/offline; LUNs and their maps go with it). Without
// force the volume goes to the recovery queue: hidden, renamed
// "<name>_<n>", its space still used, purged after 12 h. Called with mu held.
func (s *Simulator) destroyVolume(v *volumeState, force bool) *apiError {
	m := s.m
	if v.IsSVMRoot {
		return errConflict(codeVolIsSVMRoot, "uuid", "Cannot delete the SVM root volume %q.", v.Name)
	}
	if clones := m.clonesOf(v.UUID, ""); len(clones) > 0 {
		return errConflict(codeVolHasClones, "uuid", "Failed to delete volume %q because it has one or more clones (%q).", v.Name, clones[0].Name)
	}
	luns := m.lunsOfVolume(v.UUID)
	if s.cfg.StrictVolumeDelete {
		if v.JunctionPath != "" {
			return errConflict(codeInUse, "uuid", "Volume %q is mounted at %q; unmount it before deleting it.", v.Name, v.JunctionPath)
		}
		for _, l := range luns {
			if len(m.mapsOfLUN(l.UUID)) > 0 {
				return errConflict(codeInUse, "uuid", "Volume %q contains mapped LUN %q.", v.Name, m.lunPath(l))
			}
		}
	}
	for _, l := range luns {
		s.deleteLUNLocked(l)
	}
	s.dropQtreesOf(v)
	for _, sn := range v.Snapshots {
		os.RemoveAll(s.snapshotDir(sn.UUID))
	}
	delete(m.Volumes, v.UUID)
	v.Snapshots, v.JunctionPath, v.State = nil, "", "offline"
	if force {
		os.RemoveAll(s.volumeDir(v.UUID))
		return nil
	}
	m.DeletedSeq++
	v.Name = fmt.Sprintf("%s_%d", v.Name, m.DeletedSeq)
	v.DeletedAt = time.Now()
	m.RecoveryQueue = append(m.RecoveryQueue, v)
	return nil
}

// purgeRecoveryQueue drops volumes deleted more than 12 h ago.
func (s *Simulator) purgeRecoveryQueue() {
	kept := s.m.RecoveryQueue[:0]
	for _, v := range s.m.RecoveryQueue {
		if time.Since(v.DeletedAt) > recoveryQueueRetention {
			os.RemoveAll(s.volumeDir(v.UUID))
			continue
		}
		kept = append(kept, v)
	}
	s.m.RecoveryQueue = kept
}
