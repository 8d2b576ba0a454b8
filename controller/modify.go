package controller

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
)

// ControllerModifyVolume changes the mutable attributes of a volume
// (Kubernetes VolumeAttributesClass). Anything the request cannot have is
// refused before ONTAP is asked to change a thing.
func (s *Service) ControllerModifyVolume(ctx context.Context, req *csi.ControllerModifyVolumeRequest) (*csi.ControllerModifyVolumeResponse, error) {
	return reply(&csi.ControllerModifyVolumeResponse{}, s.modifyVolume(ctx, req))
}

func (s *Service) modifyVolume(ctx context.Context, req *csi.ControllerModifyVolumeRequest) error {
	id := req.GetVolumeId()
	if err := requireString("volume_id", id, maxStringBytes); err != nil {
		return err
	}
	if err := checkMap("mutable_parameters", req.GetMutableParameters()); err != nil {
		return err
	}
	m, err := parseMutableParameters(req.GetMutableParameters())
	if err != nil {
		return err
	}
	unlock, ok := s.locks.TryLock(volumeKey(id))
	if !ok {
		return pending(id)
	}
	defer unlock()
	f, err := s.findVolume(ctx, id)
	if err != nil {
		return err
	}
	if m.Empty() {
		return nil
	}
	mod, err := modifierOf(f.backend, m)
	if err != nil {
		return err
	}
	logrus.WithContext(ctx).WithFields(logrus.Fields{"volume": id, "backend": f.backend.Name(), "parameters": req.GetMutableParameters()}).
		Info("modifying volume")
	return mod.ModifyVolume(ctx, f.vol, m)
}

// modifierOf returns b as a Modifier once it accepts m for its volumes.
func modifierOf(b backends.Backend, m *backends.Modify) (backends.Modifier, error) {
	mod, ok := b.(backends.Modifier)
	if !ok {
		return nil, invalidArg("backend %s (%s) cannot modify volumes", b.Name(), b.Driver())
	}
	if err := mod.CheckModify(m); err != nil {
		return nil, backends.Named(b.Name(), err)
	}
	return mod, nil
}

// immutableKeys are StorageClass parameters that a volume keeps for life:
// a VolumeAttributesClass naming one is refused with a reason, not as an
// unknown key.
var immutableKeys = map[string]string{
	"backendType": "a volume cannot move to another backend", "storagePools": "a volume cannot move to another pool",
	"additionalStoragePools": "a volume cannot move to another pool", "requiredStorage": "a volume cannot move to another pool",
	"excludeStoragePools": "a volume cannot move to another pool", "selector": "a volume cannot move to another pool",
	"media": "a volume cannot move to another pool", "region": "a volume cannot move to another pool",
	"zone": "a volume cannot move to another pool", "provisioningType": "ONTAP's guarantee is chosen at creation",
	"encryption": "encryption is chosen at creation", "securityStyle": "the security style is chosen at creation",
	"splitOnClone": "it only matters when the volume is created", "snapshots": "it selects pools at creation",
	"clones": "it selects pools at creation", "nasType": "the protocol is chosen at creation",
	"sanType": "the protocol is chosen at creation", "fsType": "the filesystem is made at the first mount",
	"fstype": "the filesystem is made at the first mount", "IOPS": "no ONTAP pool offers it",
}

// parseMutableParameters validates mutable parameters (a
// VolumeAttributesClass's). Unknown and immutable keys are refused; the
// CO's own csi.storage.k8s.io/ keys are skipped, as in parseParameters.
func parseMutableParameters(params map[string]string) (*backends.Modify, error) {
	m := &backends.Modify{}
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		k, v := strings.TrimPrefix(key, tridentPrefix), strings.TrimSpace(params[key])
		if strings.HasPrefix(key, "csi.storage.k8s.io/") {
			continue
		}
		known, err := setMutable(m, k, v)
		if !known {
			if why, ok := immutableKeys[k]; ok {
				return nil, invalidArg("mutable parameter %q cannot be changed: %s", key, why)
			}
			return nil, invalidArg("mutable parameter %q is not supported", key)
		}
		if err != nil {
			return nil, invalidArg("mutable parameter %s=%q: %v", key, params[key], err)
		}
	}
	if m.QoSPolicy != nil && m.AdaptiveQoSPolicy != nil {
		return nil, invalidArg("mutable parameters qosPolicy and adaptiveQosPolicy exclude each other")
	}
	return m, nil
}

// tieringPolicies maps Trident's spellings to ONTAP's.
var tieringPolicies = map[string]string{
	"none": "none", "auto": "auto", "snapshot-only": "snapshot_only", "snapshot_only": "snapshot_only",
	"all": "all", "backup": "backup",
}

// setMutable reads one mutable parameter into m; known is false for
// other keys.
func setMutable(m *backends.Modify, k, v string) (known bool, err error) {
	switch k {
	case "qosPolicy":
		m.QoSPolicy, err = ontapName(v, "a QoS policy group")
	case "adaptiveQosPolicy":
		m.AdaptiveQoSPolicy, err = ontapName(v, "an adaptive QoS policy group")
	case "snapshotPolicy":
		m.SnapshotPolicy, err = ontapName(v, "a snapshot policy")
	case "exportPolicy":
		m.ExportPolicy, err = ontapName(v, "an export policy")
	case "snapshotReserve":
		var n int
		n, err = parseReserve(v)
		m.SnapshotReserve = &n
	case "tieringPolicy":
		p, ok := tieringPolicies[strings.ToLower(v)]
		if !ok {
			err = errors.New("want one of none, auto, snapshot-only, all, backup")
		}
		m.TieringPolicy = &p
	case "snapshotDir", "snapshotDirectory":
		m.SnapshotDir, err = parseBoolPtr(v)
	case "unixPermissions":
		// Checked here, as CreateVolume's parameter is, so that a bad
		// value is refused before the volume is looked up.
		_, err = config.ParseUnixPermissions(v)
		m.UnixPermissions = &v
	default:
		return false, nil
	}
	return true, err
}

// ontapName checks the name of an ONTAP object the request refers to;
// whether it exists is the backend's to say.
func ontapName(v, what string) (*string, error) {
	if v == "" || len(v) > 256 || strings.ContainsAny(v, " \t\r\n,\"'/") {
		return nil, errors.New("not " + what + " name")
	}
	return &v, nil
}

// parseReserve reads a snapshot reserve: 0 to 90 percent, as ONTAP takes
// at creation.
func parseReserve(v string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSuffix(v, "%"))
	if err != nil {
		return 0, errors.New("not a percentage")
	}
	if n < 0 || n > 90 {
		return 0, errors.New(strconv.Itoa(n) + " is outside 0..90 percent")
	}
	return n, nil
}

// setMutable takes a CreateVolume's mutable parameters: validated as for
// ControllerModifyVolume, and laid over the StorageClass's options, so a
// new volume is created with them rather than changed afterwards.
func (p *parameters) setMutable(params map[string]string) error {
	if err := checkMap("mutable_parameters", params); err != nil {
		return err
	}
	m, err := parseMutableParameters(params)
	if err != nil {
		return err
	}
	p.mutable = m
	o := &p.options
	setString := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	setString(&o.QoSPolicy, m.QoSPolicy)
	setString(&o.QoSPolicy, m.AdaptiveQoSPolicy)
	setString(&o.SnapshotPolicy, m.SnapshotPolicy)
	setString(&o.TieringPolicy, m.TieringPolicy)
	setString(&o.UnixPermissions, m.UnixPermissions)
	setString(&o.ExportPolicy, m.ExportPolicy)
	if m.SnapshotReserve != nil {
		o.SnapshotReserve = m.SnapshotReserve
	}
	if m.SnapshotDir != nil {
		o.SnapshotDir = m.SnapshotDir
	}
	if o.QoSPolicy == backends.QoSNone {
		o.QoSPolicy = ""
	}
	return nil
}

// mutableFits keeps the placements whose backend accepts the mutable
// parameters; none left is the last refusal.
func mutableFits(places []placement, m *backends.Modify) ([]placement, error) {
	if m.Empty() {
		return places, nil
	}
	var kept []placement
	var refused error
	for _, pl := range places {
		if _, err := modifierOf(pl.backend, m); err != nil {
			refused = err
			continue
		}
		kept = append(kept, pl)
	}
	if len(kept) == 0 && refused != nil {
		return nil, refused
	}
	return kept, nil
}

// modifyClone applies mutable parameters to a new clone, read afresh so
// the backend compares them with what ONTAP holds.
func modifyClone(ctx context.Context, b backends.Backend, id string, m *backends.Modify) error {
	mod, err := modifierOf(b, m)
	if err != nil {
		return err
	}
	vol, err := b.Volume(ctx, id)
	if err != nil {
		return err
	}
	return mod.ModifyVolume(ctx, vol, m)
}

// finishClone applies the mutable parameters to a clone an earlier
// attempt made: that attempt may have stopped before it applied them.
func (s *Service) finishClone(ctx context.Context, vol *backends.Volume, m *backends.Modify) error {
	if m.Empty() || vol.SourceSnapshotID == "" && vol.SourceVolumeID == "" {
		return nil
	}
	f, err := s.findVolume(ctx, vol.ID)
	if err != nil {
		return err
	}
	mod, err := modifierOf(f.backend, m)
	if err != nil {
		return err
	}
	return mod.ModifyVolume(ctx, f.vol, m)
}
