package ontapsim

import (
	"encoding/hex"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"
)

var lunResource = &resource{
	schema: newSchema(`uuid name svm.name svm.uuid location.logical_unit location.volume.name location.volume.uuid
		location.node.name location.node.uuid class enabled os_type serial_number serial_number_hex
		space.size space.used space.guarantee.requested space.guarantee.reserved
		space.scsi_thin_provisioning_support_enabled status.state status.container_state status.mapped
		status.read_only comment create_time qos_policy.name qos_policy.uuid lun_maps.logical_unit_number
		lun_maps.igroup.name lun_maps.igroup.uuid attributes.name attributes.value auto_delete _links`),
	keys:    []string{"uuid", "name"},
	sortKey: "uuid",
}

var lunAttrResource = &resource{
	schema:  newSchema(`name value _links`),
	keys:    []string{"name", "value"},
	sortKey: "name",
}

var lunPostFields = newSchema(`name svm.name svm.uuid location.logical_unit location.volume.name
	location.volume.uuid os_type space.size space.guarantee.requested
	space.scsi_thin_provisioning_support_enabled comment qos_policy.name qos_policy.uuid enabled
	clone.source.name clone.source.uuid attributes.name attributes.value`)

var (
	lunAttrPostFields  = newSchema("name value")
	lunAttrPatchFields = newSchema("value")
)

var lunPatchFields = newSchema(`name space.size space.guarantee.requested comment qos_policy.name qos_policy.uuid enabled`)

var lunOSTypes = []string{"aix", "hpux", "hyper_v", "linux", "netware", "openvms", "solaris", "solaris_efi",
	"vmware", "windows", "windows_2008", "windows_gpt", "xen"}

const (
	minLUNSize = 4096
	maxLUNSize = 128 * tib
	// maxSmallLUNSize is the largest file, so LUN, of a volume without
	// space.large_size_enabled (docs/design/ontap-rest.md §4.2).
	maxSmallLUNSize = 16 * tib
)

var lunLeafRE = regexp.MustCompile(`^[A-Za-z0-9\-._{}]+$`)

// parseLUNPath splits "/vol/<volume>/<lun>"; qtrees are not simulated.
func parseLUNPath(p string) (vol, leaf string, err *apiError) {
	parts := strings.Split(p, "/")
	if len(parts) != 4 || parts[0] != "" || parts[1] != "vol" || parts[2] == "" || parts[3] == "" {
		if len(parts) == 5 && parts[1] == "vol" {
			return "", "", errInvalid(codeLUNNameInvalid, "name", "Invalid LUN path %q: qtrees are not supported by the simulator.", p)
		}
		return "", "", errInvalid(codeLUNNameInvalid, "name", "Invalid LUN path %q. The path must be /vol/<volume>/<lun>.", p)
	}
	vol, leaf = parts[2], parts[3]
	switch {
	case len(leaf) > 255:
		return "", "", errInvalid(codeLUNNameTooLong, "name", "LUN name %q is too long (maximum 255 characters).", leaf)
	case !lunLeafRE.MatchString(leaf) || leaf == "." || leaf == "..":
		return "", "", errInvalid(codeLUNNameChars, "name", "Invalid LUN name %q. Valid characters are A-Z, a-z, 0-9, \"-\", \".\", \"_\", \"{\" and \"}\".", leaf)
	}
	return vol, leaf, nil
}

func checkLUNSize(size int64) *apiError {
	switch {
	case size < 0:
		return errInvalid(codeLUNSizeNegative, "space.size", "The LUN size must not be negative.")
	case size < minLUNSize:
		return errInvalid(codeLUNSizeTooSmall, "space.size", "The LUN size %d is too small. The minimum size is 4096 bytes.", size)
	case size > maxLUNSize:
		return errInvalid(codeLUNSizeTooLarge, "space.size", "The LUN size %d is too large. The maximum size is 128TB.", size)
	}
	return nil
}

// checkLUNInVolume refuses a LUN larger than its volume's files may be.
func checkLUNInVolume(size int64, v *volumeState) *apiError {
	if size > maxSmallLUNSize && !v.LargeSize {
		return errInvalid(codeLUNSizeTooLarge, "space.size",
			"The LUN size %d is too large. The maximum size is 16TB unless the volume has large size enabled.", size)
	}
	return nil
}

const serialChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+-"

// newSerial returns a 12-character serial unique in the cluster, starting
// with '8' as NetApp serials usually do (docs/design/ontap-rest.md §4.1). Called with mu held.
func (s *Simulator) newSerial() string {
	for {
		b := []byte("8")
		s.rngMu.Lock()
		for len(b) < 12 {
			b = append(b, serialChars[s.rng.IntN(len(serialChars))])
		}
		s.rngMu.Unlock()
		serial := string(b)
		unique := true
		for _, l := range s.m.LUNs {
			if l.Serial == serial {
				unique = false
			}
		}
		if unique {
			return serial
		}
	}
}

func (s *Simulator) renderLUN(u *usage, l *lunState) map[string]any {
	m := s.m
	v := m.Volumes[l.Volume]
	state := "online"
	if !l.Enabled {
		state = "offline"
	}
	container := "online"
	if v == nil || v.State != "online" {
		container = "offline"
	}
	maps := m.mapsOfLUN(l.UUID)
	rec := map[string]any{
		"uuid": l.UUID, "name": m.lunPath(l), "class": "regular", "enabled": l.Enabled, "os_type": l.OSType,
		"serial_number": l.Serial, "serial_number_hex": hex.EncodeToString([]byte(l.Serial)),
		"create_time": formatTime(l.CreateTime), "auto_delete": false,
		"space": map[string]any{
			"size": l.Size, "used": u.lunUsed(l),
			"guarantee":                              map[string]any{"requested": l.Reserved, "reserved": l.Reserved && v != nil && v.Guarantee == "volume"},
			"scsi_thin_provisioning_support_enabled": !l.Reserved,
		},
		"status": map[string]any{"state": state, "container_state": container, "mapped": len(maps) > 0, "read_only": false},
		"_links": selfLink("/api/storage/luns/" + l.UUID),
	}
	if svm := m.svm(l.SVM); svm != nil {
		rec["svm"] = map[string]any{"name": svm.Name, "uuid": svm.UUID}
	}
	loc := map[string]any{"logical_unit": l.Leaf}
	if v != nil {
		loc["volume"] = map[string]any{"name": v.Name, "uuid": v.UUID}
	}
	if n := m.lunNode(l); n != nil {
		loc["node"] = map[string]any{"name": n.Name, "uuid": n.UUID}
	}
	rec["location"] = loc
	if l.Comment != "" {
		rec["comment"] = l.Comment
	}
	if l.QoSPolicy != "" {
		rec["qos_policy"] = map[string]any{"name": l.QoSPolicy}
	}
	if len(maps) > 0 {
		var lm []any
		for _, mp := range maps {
			ig := m.IGroups[mp.IGroup]
			lm = append(lm, map[string]any{"logical_unit_number": mp.ID, "igroup": map[string]any{"name": ig.Name, "uuid": ig.UUID}})
		}
		rec["lun_maps"] = lm
	}
	if len(l.Attributes) > 0 {
		var attrs []any
		for _, a := range l.Attributes {
			attrs = append(attrs, map[string]any{"name": a.Name, "value": a.Value})
		}
		rec["attributes"] = attrs
	}
	return rec
}

func (s *Simulator) getLUNs(c *call) (*reply, *apiError) {
	u := c.usage()
	recs := make([]map[string]any, 0, len(s.m.LUNs))
	for _, l := range s.m.LUNs {
		recs = append(recs, s.renderLUN(u, l))
	}
	return c.list(lunResource, recs)
}

func (c *call) lun(param string) (*lunState, *apiError) {
	l := c.m.LUNs[c.params[param]]
	if l == nil {
		return nil, errNotFound(codeLUNNotFound, "uuid", "The specified LUN does not exist.")
	}
	return l, nil
}

func (s *Simulator) getLUN(c *call) (*reply, *apiError) {
	l, err := c.lun("uuid")
	if err != nil {
		return nil, err
	}
	return c.instance(lunResource, s.renderLUN(c.usage(), l))
}

// lunSpec is a validated LUN create.
type lunSpec struct {
	SVM        *svmState
	Path       string
	Volume     string // volume name
	Leaf       string
	Size       int64 // 0 for a clone without size: the source's
	OSType     string
	Reserved   bool
	Comment    string
	QoSPolicy  string
	Enabled    bool
	Attributes []lunAttr
	CloneSrc   string // clone.source.name or uuid
	CloneByID  bool
}

func (s *Simulator) parseLUNSpec(c *call) (*lunSpec, *apiError) {
	b := c.body
	if err := c.checkBody(lunPostFields, lunResource); err != nil {
		return nil, err
	}
	svm, err := c.resolveSVM(b, true)
	if err != nil {
		return nil, err
	}
	spec := &lunSpec{SVM: svm, Enabled: true}
	name, hasName := b.str("name")
	if !hasName {
		vol, _ := b.str("location.volume.name")
		leaf, _ := b.str("location.logical_unit")
		if vol != "" && leaf != "" {
			name, hasName = "/vol/"+vol+"/"+leaf, true
		}
	}
	if b.err != nil {
		return nil, b.err
	}
	if !hasName {
		return nil, errInvalid(codeLUNMissingProp, "name", "A required property is missing: \"name\".")
	}
	if spec.Volume, spec.Leaf, err = parseLUNPath(name); err != nil {
		return nil, err
	}
	spec.Path = name
	if n, ok := b.str("clone.source.name"); ok {
		spec.CloneSrc = n
	} else if u, ok := b.str("clone.source.uuid"); ok {
		spec.CloneSrc, spec.CloneByID = u, true
	}
	os, hasOS := b.enum("os_type", lunOSTypes...)
	size, hasSize := b.size("space.size")
	if b.err != nil {
		return nil, b.err
	}
	if spec.CloneSrc != "" {
		if hasOS {
			return nil, errInvalid(codeLUNCloneProp, "os_type", "The property \"os_type\" cannot be specified when cloning a LUN.")
		}
	} else {
		if !hasOS {
			return nil, errInvalid(codeLUNMissingProp, "os_type", "A required property is missing: \"os_type\".")
		}
		if !hasSize {
			return nil, errInvalid(codeLUNMissingProp, "space.size", "A required property is missing: \"space.size\".")
		}
	}
	spec.OSType = os
	if hasSize {
		if err := checkLUNSize(size); err != nil {
			return nil, err
		}
		spec.Size = roundUp4K(size)
	}
	if err := spec.readOptions(b); err != nil {
		return nil, err
	}
	if b.err != nil {
		return nil, b.err
	}
	return spec, nil
}

// readOptions reads the space reservation, comment, QoS policy, state and
// attributes of a LUN create.
func (spec *lunSpec) readOptions(b *bodyReader) *apiError {
	if r, ok := b.boolean("space.guarantee.requested"); ok {
		spec.Reserved = r
	}
	if thin, ok := b.boolean("space.scsi_thin_provisioning_support_enabled"); ok && !b.has("space.guarantee.requested") {
		spec.Reserved = !thin
	}
	if cm, ok := b.str("comment"); ok {
		if len(cm) > 254 {
			return errInvalid(codeInvalidValue, "comment", "The LUN comment is too long (maximum 254 characters).")
		}
		spec.Comment = cm
	}
	if q, ok := b.str("qos_policy.name"); ok {
		spec.QoSPolicy = q
	}
	if e, ok := b.boolean("enabled"); ok {
		spec.Enabled = e
	}
	if attrs, ok := b.objects("attributes"); ok {
		for _, a := range attrs {
			n, _ := a.str("name")
			v, _ := a.str("value")
			b.sub(a)
			if err := checkLUNAttr(n, v); err != nil {
				return err
			}
			spec.Attributes = append(spec.Attributes, lunAttr{Name: n, Value: v})
		}
	}
	return nil
}

func checkLUNAttr(name, value string) *apiError {
	switch {
	case name == "":
		return errInvalid(codeLUNAttrName, "name", "The LUN attribute name must not be empty.")
	case len(name)+len(value) > 4092:
		return errInvalid(codeLUNAttrTooLong, "value", "The combined length of the LUN attribute name and value exceeds 4092 bytes.")
	}
	return nil
}

func (s *Simulator) postLUN(c *call) (*reply, *apiError) {
	spec, err := s.parseLUNSpec(c)
	if err != nil {
		return nil, err
	}
	if !s.cfg.lunCreateAsync() {
		if err := c.failIfFaulted(); err != nil {
			return nil, err
		}
		l, err := s.createLUN(spec)
		if err != nil {
			return nil, err
		}
		return c.created(s.renderLUN(c.usage(), l), "/api/storage/luns/"+l.UUID), nil
	}
	// 9.16.1+: asynchronous. Requests are validated now, the LUN appears when
	// the job commits.
	key := "lun:" + spec.SVM.UUID + spec.Path
	if s.creating[key] != "" {
		return nil, errConflict(5702832, "name", "A LUN with the name %q is already being created.", spec.Path)
	}
	var j *job
	j = s.startJob(c, spec.SVM, s.draw(s.cfg.Latency.LUNCreate), func() *apiError {
		_, err := s.createLUN(spec)
		return err
	}, func() {
		if s.creating[key] == j.UUID {
			delete(s.creating, key)
		}
	})
	s.creating[key] = j.UUID
	return asyncReply(j, "/api/storage/luns/?name="+url.QueryEscape(spec.Path), map[string]any{"name": spec.Path}), nil
}

// createLUN applies a LUN create. Called with mu held.
func (s *Simulator) createLUN(spec *lunSpec) (*lunState, *apiError) {
	m := s.m
	v := m.volumeByName(spec.SVM.UUID, spec.Volume)
	if v == nil {
		return nil, errNotFound(codeLUNVolNotFound, "name", "Volume %q does not exist in SVM %q.", spec.Volume, spec.SVM.Name)
	}
	switch {
	case v.IsSVMRoot:
		return nil, errInvalid(codeLUNInSVMRoot, "name", "LUNs cannot be created in the SVM root volume.")
	case v.State != "online":
		return nil, errConflict(codeLUNVolOffline, "name", "Volume %q is not online.", v.Name)
	case m.lunByPath(spec.SVM.UUID, spec.Path) != nil:
		return nil, errConflict(codeLUNExists, "name", "A LUN or NVMe namespace already exists at path %q.", spec.Path)
	case len(m.lunsOfVolume(v.UUID)) >= s.cfg.MaxLUNsPerVolume:
		return nil, errInvalid(codeTooManyLUNs, "name", "Volume %q already holds the maximum number of LUNs (%d).", v.Name, s.cfg.MaxLUNsPerVolume)
	}
	if err := checkLUNInVolume(spec.Size, v); err != nil {
		return nil, err
	}
	qos, err := s.resolveQoS(spec.SVM.UUID, spec.QoSPolicy, "qos_policy.name")
	if err != nil {
		return nil, err
	}
	l := &lunState{
		UUID: newUUID(), Volume: v.UUID, Leaf: spec.Leaf, SVM: spec.SVM.UUID, Size: spec.Size,
		OSType: spec.OSType, Reserved: spec.Reserved, Comment: spec.Comment, QoSPolicy: qos,
		Enabled: spec.Enabled, CreateTime: time.Now(), Attributes: spec.Attributes,
	}
	var srcFile string
	if spec.CloneSrc != "" {
		src, srcVol, file, err := s.resolveLUNCloneSource(spec)
		if err != nil {
			return nil, err
		}
		if srcVol != v.UUID {
			return nil, errInvalid(codeLUNCloneOtherVol, "clone.source", "A LUN can only be cloned within its volume.")
		}
		l.OSType = src.OSType
		if l.Attributes == nil {
			l.Attributes = append([]lunAttr(nil), src.Attributes...)
		}
		if l.Size == 0 {
			l.Size = src.Size
		}
		if l.Size < src.Size {
			return nil, errInvalid(codeLUNSizeTooSmall, "space.size", "A LUN clone cannot be smaller than its source (%d bytes).", src.Size)
		}
		srcFile = file
	}
	if l.Reserved {
		u := s.newUsage()
		if avail := u.volumeAvailable(v); avail < l.Size {
			return nil, errLUNSpace(v, l.Size, avail)
		}
	}
	l.Serial = s.newSerial()
	var ferr error
	if srcFile != "" {
		if ferr = copyFileSparse(srcFile, s.lunFile(l.UUID), 0o600); ferr == nil {
			ferr = s.resizeLUNFile(l)
		}
	} else {
		ferr = s.createLUNFile(l)
	}
	if ferr != nil {
		os.Remove(s.lunFile(l.UUID))
		return nil, newError(http.StatusInternalServerError, codeJobFailed, "", "Failed to create the LUN backing file: %v", ferr)
	}
	m.LUNs[l.UUID] = l
	return l, nil
}

// lunSource describes a clone source: a live LUN or one in a snapshot
// ("/vol/v/.snapshot/<snap>/<lun>").
type lunSource struct {
	Size   int64
	OSType string
	// Attributes come with the clone (ONTAP: "a clone can already have
	// attributes from its source").
	Attributes []lunAttr
}

func (s *Simulator) resolveLUNCloneSource(spec *lunSpec) (*lunSource, string, string, *apiError) {
	m := s.m
	notFound := errNotFound(codeLUNCloneSource, "clone.source", "The clone source LUN %q does not exist.", spec.CloneSrc)
	if spec.CloneByID {
		l := m.LUNs[spec.CloneSrc]
		if l == nil {
			return nil, "", "", notFound
		}
		return &lunSource{Size: l.Size, OSType: l.OSType, Attributes: l.Attributes}, l.Volume, s.lunFile(l.UUID), nil
	}
	parts := strings.Split(spec.CloneSrc, "/")
	if len(parts) == 6 && parts[1] == "vol" && parts[3] == ".snapshot" {
		v := m.volumeByName(spec.SVM.UUID, parts[2])
		if v == nil {
			return nil, "", "", notFound
		}
		sn := v.snapshotByName(parts[4])
		if sn == nil {
			return nil, "", "", notFound
		}
		for _, sl := range sn.LUNs {
			if sl.Leaf == parts[5] {
				return &lunSource{Size: sl.Size, OSType: sl.OSType, Attributes: sl.Attributes}, v.UUID, s.snapshotLUNFile(sn.UUID, sl.UUID), nil
			}
		}
		return nil, "", "", notFound
	}
	l := m.lunByPath(spec.SVM.UUID, spec.CloneSrc)
	if l == nil {
		return nil, "", "", notFound
	}
	return &lunSource{Size: l.Size, OSType: l.OSType, Attributes: l.Attributes}, l.Volume, s.lunFile(l.UUID), nil
}

func errLUNSpace(v *volumeState, need, avail int64) *apiError {
	return newError(http.StatusInternalServerError, codeLUNNoSpace, "space.size",
		"There is not enough space in volume %q for a space-reserved LUN of %s (%s available).", v.Name, humanSize(need), humanSize(avail))
}

func (s *Simulator) patchLUN(c *call) (*reply, *apiError) {
	l, err := c.lun("uuid")
	if err != nil {
		return nil, err
	}
	p, err := s.parseLUNPatch(c, l)
	if err != nil {
		return nil, err
	}
	apply := func() *apiError { return s.applyLUNPatch(l.UUID, p) }
	return s.lunOperation(c, l, apply)
}

// lunOperation runs the change of LUN l as a job where LUN operations are
// asynchronous (9.16.1+), else at once.
func (s *Simulator) lunOperation(c *call, l *lunState, apply func() *apiError) (*reply, *apiError) {
	if s.cfg.lunCreateAsync() {
		j := s.startJob(c, s.m.svm(l.SVM), s.draw(s.cfg.Latency.SyncMutation), apply, nil)
		return asyncReply(j, ""), nil
	}
	if err := c.failIfFaulted(); err != nil {
		return nil, err
	}
	if err := apply(); err != nil {
		return nil, err
	}
	return okReply(), nil
}

// lunPatch is a LUN PATCH checked on its own; nil fields are left alone.
type lunPatch struct {
	size     *int64  // rounded up to 4 KiB
	name     *string // the new path
	leaf     string  // of the new path
	comment  *string
	qos      *string
	enabled  *bool
	reserved *bool
}

// parseLUNPatch reads and checks a PATCH of LUN l.
func (s *Simulator) parseLUNPatch(c *call, l *lunState) (*lunPatch, *apiError) {
	if err := c.patchBody(lunPatchFields, lunResource); err != nil {
		return nil, err
	}
	b := c.body
	p := &lunPatch{}
	size, hasSize := b.size("space.size")
	name, hasName := b.str("name")
	comment, hasComment := b.str("comment")
	qos, hasQoS := b.str("qos_policy.name")
	enabled, hasEnabled := b.boolean("enabled")
	reserved, hasReserved := b.boolean("space.guarantee.requested")
	if b.err != nil {
		return nil, b.err
	}
	if hasSize {
		if size < 0 {
			return nil, errInvalid(codeLUNSizeNegative, "space.size", "The LUN size must not be negative.")
		}
		if size > maxLUNSize {
			return nil, errInvalid(codeLUNSizeTooLarge, "space.size", "The LUN size %d is too large. The maximum size is 128TB.", size)
		}
		p.size = ptr(roundUp4K(size))
	}
	if hasName {
		vol, lf, err := parseLUNPath(name)
		if err != nil {
			return nil, err
		}
		if v := s.m.Volumes[l.Volume]; v == nil || vol != v.Name {
			return nil, errInvalid(codeNotSupported, "name", "Moving a LUN to another volume is not supported by the simulator.")
		}
		p.name, p.leaf = &name, lf
	}
	if hasComment && len(comment) > 254 {
		return nil, errInvalid(codeInvalidValue, "comment", "The LUN comment is too long (maximum 254 characters).")
	}
	if hasComment {
		p.comment = &comment
	}
	if hasQoS {
		p.qos = &qos
	}
	if hasEnabled {
		p.enabled = &enabled
	}
	if hasReserved {
		p.reserved = &reserved
	}
	return p, nil
}

// applyLUNPatch checks p against the LUN as it is now and applies it.
func (s *Simulator) applyLUNPatch(uuid string, p *lunPatch) *apiError {
	cur := s.m.LUNs[uuid]
	if cur == nil {
		return errNotFound(codeLUNNotFound, "uuid", "The specified LUN does not exist.")
	}
	v := s.m.Volumes[cur.Volume]
	if v == nil || v.State != "online" {
		return errConflict(codeLUNVolOffline, "uuid", "The volume containing the LUN is not online.")
	}
	qos, err := s.resolveQoSChange(cur.SVM, p.qos, "qos_policy.name")
	if err != nil {
		return err
	}
	newSize := cur.Size
	if p.size != nil {
		switch newSize = *p.size; {
		case newSize == cur.Size:
			return errInvalid(codeLUNSameSize, "space.size", "Cannot modify the LUN size to its current size (%d bytes).", newSize)
		case newSize < cur.Size:
			return errInvalid(codeLUNShrink, "space.size", "Reducing the size of a LUN is not supported (current %d bytes, requested %d).", cur.Size, newSize)
		}
		if err := checkLUNInVolume(newSize, v); err != nil {
			return err
		}
	}
	res := cur.Reserved
	if p.reserved != nil {
		res = *p.reserved
	}
	if res {
		u := s.newUsage()
		need := newSize
		if cur.Reserved {
			need -= cur.Size
		} else {
			need -= u.lunUsed(cur)
		}
		if avail := u.volumeAvailable(v); need > 0 && avail < need {
			return errLUNSpace(v, newSize, avail)
		}
	}
	if p.name != nil && p.leaf != cur.Leaf && s.m.lunByPath(cur.SVM, *p.name) != nil {
		return errConflict(codeLUNRenameExists, "name", "A LUN already exists at path %q.", *p.name)
	}
	if p.size != nil {
		cur.Size = newSize
		if err := s.resizeLUNFile(cur); err != nil {
			return newError(http.StatusInternalServerError, codeJobFailed, "", "Failed to resize the LUN backing file: %v", err)
		}
	}
	if p.name != nil {
		cur.Leaf = p.leaf
	}
	if p.comment != nil {
		cur.Comment = *p.comment
	}
	if qos != nil {
		cur.QoSPolicy = *qos
	}
	if p.enabled != nil {
		cur.Enabled = *p.enabled
	}
	cur.Reserved = res
	return nil
}

func (s *Simulator) deleteLUN(c *call) (*reply, *apiError) {
	l, err := c.lun("uuid")
	if err != nil {
		return nil, err
	}
	allow := c.queryBool("allow_delete_while_mapped")
	apply := func() *apiError {
		cur := s.m.LUNs[l.UUID]
		if cur == nil {
			return errNotFound(codeLUNNotFound, "uuid", "The specified LUN does not exist.")
		}
		if v := s.m.Volumes[cur.Volume]; v == nil || v.State != "online" {
			return errConflict(codeLUNVolOffline, "uuid", "The volume containing the LUN is not online.")
		}
		if len(s.m.mapsOfLUN(cur.UUID)) > 0 && !allow {
			return errConflict(codeLUNMapped, "uuid", "LUN %q is mapped to an initiator group. Unmap it or set allow_delete_while_mapped.", s.m.lunPath(cur))
		}
		s.deleteLUNLocked(cur)
		return nil
	}
	return s.lunOperation(c, l, apply)
}

// deleteLUNLocked removes a LUN, its maps and its backing file.
func (s *Simulator) deleteLUNLocked(l *lunState) {
	s.m.removeMaps(func(lm *lunMapState) bool { return lm.LUN != l.UUID })
	delete(s.m.LUNs, l.UUID)
	os.Remove(s.lunFile(l.UUID))
}

// ---- attributes ----

func (s *Simulator) renderLUNAttr(l *lunState, a lunAttr) map[string]any {
	return map[string]any{"name": a.Name, "value": a.Value,
		"_links": selfLink("/api/storage/luns/" + l.UUID + "/attributes/" + a.Name)}
}

func (s *Simulator) getLUNAttrs(c *call) (*reply, *apiError) {
	l, err := c.lun("lun.uuid")
	if err != nil {
		return nil, err
	}
	var recs []map[string]any
	for _, a := range l.Attributes {
		recs = append(recs, s.renderLUNAttr(l, a))
	}
	return c.list(lunAttrResource, recs)
}

func (c *call) lunAttr() (*lunState, int, *apiError) {
	l, err := c.lun("lun.uuid")
	if err != nil {
		return nil, 0, err
	}
	for i, a := range l.Attributes {
		if a.Name == c.params["name"] {
			return l, i, nil
		}
	}
	return nil, 0, errNotFound(codeNotFound, "name", "entry doesn't exist")
}

func (s *Simulator) getLUNAttr(c *call) (*reply, *apiError) {
	l, i, err := c.lunAttr()
	if err != nil {
		return nil, err
	}
	return c.instance(lunAttrResource, s.renderLUNAttr(l, l.Attributes[i]))
}

func (s *Simulator) postLUNAttr(c *call) (*reply, *apiError) {
	l, err := c.lun("lun.uuid")
	if err != nil {
		return nil, err
	}
	if err := c.checkBody(lunAttrPostFields, lunAttrResource); err != nil {
		return nil, err
	}
	name, _ := c.body.str("name")
	value, _ := c.body.str("value")
	if c.body.err != nil {
		return nil, c.body.err
	}
	if err := checkLUNAttr(name, value); err != nil {
		return nil, err
	}
	for _, a := range l.Attributes {
		if a.Name == name {
			return nil, errConflict(codeLUNAttrExists, "name", "LUN attribute %q already exists.", name)
		}
	}
	a := lunAttr{Name: name, Value: value}
	l.Attributes = append(l.Attributes, a)
	return c.created(s.renderLUNAttr(l, a), "/api/storage/luns/"+l.UUID+"/attributes/"+name), nil
}

func (s *Simulator) patchLUNAttr(c *call) (*reply, *apiError) {
	l, i, err := c.lunAttr()
	if err != nil {
		return nil, err
	}
	if err := c.patchBody(lunAttrPatchFields, lunAttrResource); err != nil {
		return nil, err
	}
	value, _ := c.body.str("value")
	if c.body.err != nil {
		return nil, c.body.err
	}
	if err := checkLUNAttr(l.Attributes[i].Name, value); err != nil {
		return nil, err
	}
	l.Attributes[i].Value = value
	return okReply(), nil
}

func (s *Simulator) deleteLUNAttr(c *call) (*reply, *apiError) {
	l, i, err := c.lunAttr()
	if err != nil {
		return nil, err
	}
	l.Attributes = append(l.Attributes[:i], l.Attributes[i+1:]...)
	return okReply(), nil
}
