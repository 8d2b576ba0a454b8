package ontapsim

import (
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

var snapshotResource = &resource{
	schema: newSchema(`uuid name create_time comment expiry_time size logical_size owners state
		snapmirror_label svm.name svm.uuid volume.name volume.uuid version_uuid provenance_volume.uuid
		reclaimable_space delta _links`),
	keys:    []string{"uuid", "name"},
	sortKey: "uuid",
}

var snapshotPostFields = newSchema(`name svm.name svm.uuid comment expiry_time snapmirror_label volume.name volume.uuid`)
var snapshotPatchFields = newSchema(`name comment expiry_time snapmirror_label`)

const maxSnapshots = 1023

func validateSnapshotName(name string) *apiError {
	switch {
	case name == "":
		return errInvalid(codeMissingRequired, "name", "Request missing required value \"name\".")
	case len(name) > 255 || strings.ContainsAny(name, "/, \t\n") || name == "." || name == "..":
		return errInvalid(codeSnapNameInvalid, "name", "Invalid snapshot name %q.", name)
	}
	return nil
}

// createSnapshot takes a snapshot of v: the metadata and a sparse copy of
// the volume's directory and LUN files. Called with mu held.
func (s *Simulator) createSnapshot(v *volumeState, name, comment string) (*snapshotState, *apiError) {
	switch {
	case v.State != "online":
		return nil, errConflict(codeSnapVolOffline, "volume", "Volume %q is not online.", v.Name)
	case v.snapshotByName(name) != nil:
		return nil, errConflict(codeSnapDuplicate, "name", "Snapshot %q already exists in volume %q.", name, v.Name)
	case len(v.Snapshots) >= maxSnapshots:
		return nil, errInvalid(codeSnapMax, "name", "Volume %q already has the maximum number of snapshots (%d).", v.Name, maxSnapshots)
	}
	sn := &snapshotState{UUID: newUUID(), Name: name, CreateTime: time.Now(), Comment: comment}
	luns := s.m.lunsOfVolume(v.UUID)
	for _, l := range luns {
		sn.LUNs = append(sn.LUNs, snapLUN{
			UUID: l.UUID, Leaf: l.Leaf, Size: l.Size, OSType: l.OSType, Reserved: l.Reserved,
			Comment: l.Comment, Attributes: append([]lunAttr(nil), l.Attributes...),
		})
	}
	if err := s.snapshotData(v, sn, luns); err != nil {
		os.RemoveAll(s.snapshotDir(sn.UUID))
		return nil, newError(http.StatusInternalServerError, codeJobFailed, "", "Failed to create snapshot %q: %v", name, err)
	}
	v.Snapshots = append(v.Snapshots, sn)
	return sn, nil
}

func (s *Simulator) renderSnapshot(v *volumeState, sn *snapshotState) map[string]any {
	rec := map[string]any{
		"uuid": sn.UUID, "name": sn.Name, "create_time": formatTime(sn.CreateTime), "state": "valid",
		"size": 0, "logical_size": 0, "version_uuid": sn.UUID,
		"volume": map[string]any{"name": v.Name, "uuid": v.UUID},
		"_links": selfLink("/api/storage/volumes/" + v.UUID + "/snapshots/" + sn.UUID),
	}
	if svm := s.m.svm(v.SVM); svm != nil {
		rec["svm"] = map[string]any{"name": svm.Name, "uuid": svm.UUID}
	}
	if sn.Comment != "" {
		rec["comment"] = sn.Comment
	}
	if sn.ExpiryTime != "" {
		rec["expiry_time"] = sn.ExpiryTime
	}
	if sn.SnapmirrorLabel != "" {
		rec["snapmirror_label"] = sn.SnapmirrorLabel
	}
	return rec
}

// bulk reports whether the path names every volume: ONTAP's bulk snapshot
// endpoints take "*" as the volume UUID (/api/storage/volumes/*/snapshots).
func (c *call) bulk() bool { return c.params["volume.uuid"] == "*" }

func (s *Simulator) getSnapshots(c *call) (*reply, *apiError) {
	vols := []*volumeState{}
	if c.bulk() {
		for _, v := range s.m.Volumes {
			vols = append(vols, v)
		}
	} else {
		v, err := c.volume("volume.uuid")
		if err != nil {
			return nil, err
		}
		vols = append(vols, v)
	}
	var recs []map[string]any
	for _, v := range vols {
		for _, sn := range v.Snapshots {
			recs = append(recs, s.renderSnapshot(v, sn))
		}
	}
	return c.list(snapshotResource, recs)
}

func (c *call) snapshot() (*volumeState, *snapshotState, *apiError) {
	missing := errNotFound(codeNotFound, "uuid", "entry doesn't exist")
	if c.bulk() {
		for _, v := range c.m.Volumes {
			if sn := v.snapshot(c.params["uuid"]); sn != nil {
				return v, sn, nil
			}
		}
		return nil, nil, missing
	}
	v, err := c.volume("volume.uuid")
	if err != nil {
		return nil, nil, err
	}
	sn := v.snapshot(c.params["uuid"])
	if sn == nil {
		return nil, nil, missing
	}
	return v, sn, nil
}

func (s *Simulator) getSnapshot(c *call) (*reply, *apiError) {
	v, sn, err := c.snapshot()
	if err != nil {
		return nil, err
	}
	return c.instance(snapshotResource, s.renderSnapshot(v, sn))
}

func (s *Simulator) postSnapshot(c *call) (*reply, *apiError) {
	b := c.body
	if err := c.checkBody(snapshotPostFields, snapshotResource); err != nil {
		return nil, err
	}
	v, err := s.snapshotTarget(c)
	if err != nil {
		return nil, err
	}
	svm, err := c.resolveSVM(b, false)
	if err != nil {
		return nil, err
	}
	if svm.UUID != v.SVM {
		return nil, errInvalid(codeSVMMismatch, "svm", "The SVM does not own volume %q.", v.Name)
	}
	name, _ := b.str("name")
	comment, _ := b.str("comment")
	expiry, _ := b.str("expiry_time")
	label, _ := b.str("snapmirror_label")
	if b.err != nil {
		return nil, b.err
	}
	if err := validateSnapshotName(name); err != nil {
		return nil, err
	}
	id := v.UUID
	j := s.startJob(c, svm, s.draw(s.cfg.Latency.SnapshotCreate), func() *apiError {
		cur := s.m.Volumes[id]
		if cur == nil {
			return errNotFound(codeNotFound, "volume.uuid", "entry doesn't exist")
		}
		sn, err := s.createSnapshot(cur, name, comment)
		if err != nil {
			return err
		}
		sn.ExpiryTime, sn.SnapmirrorLabel = expiry, label
		return nil
	}, nil)
	return asyncReply(j, "/api/storage/volumes/"+v.UUID+"/snapshots/?name="+url.QueryEscape(name),
		map[string]any{"name": name, "volume": map[string]any{"name": v.Name, "uuid": v.UUID}}), nil
}

// snapshotTarget is the volume a snapshot POST is for: the one in the path,
// or, on the bulk endpoint, the one named in the body.
func (s *Simulator) snapshotTarget(c *call) (*volumeState, *apiError) {
	if !c.bulk() {
		return c.volume("volume.uuid")
	}
	b := c.body
	uuid, hasUUID := b.str("volume.uuid")
	name, hasName := b.str("volume.name")
	if b.err != nil {
		return nil, b.err
	}
	var v *volumeState
	switch {
	case hasUUID:
		v = s.m.Volumes[uuid]
	case hasName:
		svm, err := c.resolveSVM(b, false)
		if err != nil {
			return nil, err
		}
		v = s.m.volumeByName(svm.UUID, name)
	default:
		return nil, errInvalid(codeMissingRequired, "volume", "Request missing required value \"volume.uuid\" or \"volume.name\".")
	}
	if v == nil {
		return nil, errNotFound(codeNotFound, "volume", "Volume %q does not exist.", name+uuid)
	}
	return v, nil
}

func (s *Simulator) patchSnapshot(c *call) (*reply, *apiError) {
	v, sn, err := c.snapshot()
	if err != nil {
		return nil, err
	}
	if err := c.patchBody(snapshotPatchFields, snapshotResource); err != nil {
		return nil, err
	}
	b := c.body
	name, hasName := b.str("name")
	comment, hasComment := b.str("comment")
	expiry, hasExpiry := b.str("expiry_time")
	label, hasLabel := b.str("snapmirror_label")
	if b.err != nil {
		return nil, b.err
	}
	if hasName {
		if err := validateSnapshotName(name); err != nil {
			return nil, err
		}
	}
	vid, sid := v.UUID, sn.UUID
	j := s.startJob(c, s.m.svm(v.SVM), s.draw(s.cfg.Latency.VolumePatch), func() *apiError {
		cur := s.m.Volumes[vid]
		if cur == nil {
			return errNotFound(codeNotFound, "volume.uuid", "entry doesn't exist")
		}
		csn := cur.snapshot(sid)
		if csn == nil {
			return errNotFound(codeSnapNotFound, "uuid", "Snapshot does not exist.")
		}
		if hasName && name != csn.Name && cur.snapshotByName(name) != nil {
			return errConflict(codeSnapDuplicate, "name", "Snapshot %q already exists in volume %q.", name, cur.Name)
		}
		if hasName {
			csn.Name = name
		}
		if hasComment {
			csn.Comment = comment
		}
		if hasExpiry {
			csn.ExpiryTime = expiry
		}
		if hasLabel {
			csn.SnapmirrorLabel = label
		}
		return nil
	}, nil)
	return asyncReply(j, ""), nil
}

func (s *Simulator) deleteSnapshot(c *call) (*reply, *apiError) {
	v, sn, err := c.snapshot()
	if err != nil {
		return nil, err
	}
	vid, sid := v.UUID, sn.UUID
	j := s.startJob(c, s.m.svm(v.SVM), s.draw(s.cfg.Latency.SnapshotDelete), func() *apiError {
		cur := s.m.Volumes[vid]
		if cur == nil {
			return errNotFound(codeNotFound, "volume.uuid", "entry doesn't exist")
		}
		return s.destroySnapshot(cur, sid)
	}, nil)
	return asyncReply(j, ""), nil
}

// destroySnapshot deletes a snapshot unless a FlexClone depends on it
// (1638555, what ONTAP reports and Trident treats as "snapshot busy").
func (s *Simulator) destroySnapshot(v *volumeState, id string) *apiError {
	sn := v.snapshot(id)
	if sn == nil {
		return errNotFound(codeSnapNotFound, "uuid", "Snapshot does not exist.")
	}
	if clones := s.m.clonesOf(v.UUID, sn.UUID); len(clones) > 0 {
		return errConflict(codeSnapBusy, "uuid",
			"Snapshot copy %q of volume %q on Vserver %q has not expired or is locked. Use the \"snapshot show -fields owners, expiry-time, snaplock-expiry-time\" command to view the expiry and lock status of the Snapshot copy. (FlexClone %q depends on it.)",
			sn.Name, v.Name, s.m.svm(v.SVM).Name, clones[0].Name)
	}
	kept := v.Snapshots[:0]
	for _, other := range v.Snapshots {
		if other.UUID != id {
			kept = append(kept, other)
		}
	}
	v.Snapshots = kept
	os.RemoveAll(s.snapshotDir(id))
	return nil
}
