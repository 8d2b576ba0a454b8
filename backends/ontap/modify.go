package ontap

import (
	"context"
	"strings"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/backends/ontap/rest"
)

// Changing a volume in place (CSI ControllerModifyVolume). ontap-nas and
// ontap-san change their FlexVol in one PATCH; ontap-san's QoS policy
// group belongs to its LUN, as at creation, and takes a PATCH of the LUN.
// Everything the change names is looked up first, so a refusal changes
// nothing on ONTAP (CSI: INVALID_ARGUMENT means nothing was applied); what
// already holds is left out, so a repeated call sends nothing. The FlexVol
// PATCH goes before the LUN's: it is the one ONTAP may still refuse (a
// tiering policy the aggregate does not allow), and it changes all or
// nothing.

// CheckModify implements backends.Modifier.
func (n *nasDriver) CheckModify(m *backends.Modify) error {
	if m.ExportPolicy != nil && n.cfg.AutoExportPolicy {
		return backends.Errorf(backends.ErrInvalid,
			"backend %s manages export policies itself (autoExportPolicy): exportPolicy cannot be set", n.Name())
	}
	return checkPermissions(m)
}

// ModifyVolume implements backends.Modifier.
func (n *nasDriver) ModifyVolume(ctx context.Context, vol *backends.Volume, m *backends.Modify) error {
	return n.modifyFlexVol(ctx, vol, m, 1, false)
}

// CheckModify implements backends.Modifier: an iSCSI volume has no NFS
// export, permissions or snapshot directory to change.
func (s *sanDriver) CheckModify(m *backends.Modify) error {
	for key, set := range map[string]bool{
		"exportPolicy": m.ExportPolicy != nil, "unixPermissions": m.UnixPermissions != nil, "snapshotDir": m.SnapshotDir != nil,
	} {
		if set {
			return backends.Errorf(backends.ErrInvalid, "%s does not apply to %s volumes (iSCSI)", key, s.Driver())
		}
	}
	return nil
}

// ModifyVolume implements backends.Modifier.
func (s *sanDriver) ModifyVolume(ctx context.Context, vol *backends.Volume, m *backends.Modify) error {
	return s.modifyFlexVol(ctx, vol, m, lunHeadroom, true)
}

// errEconomyModify refuses changes to economy volumes: their snapshot,
// tiering and space settings are the shared FlexVol's, and per-volume
// changes of qtrees and LUNs are not implemented.
func errEconomyModify(driver string) error {
	return backends.Errorf(backends.ErrInvalid,
		"%s volumes share a FlexVol with others: their attributes cannot be changed one by one", driver)
}

// CheckModify implements backends.Modifier: nothing can change.
func (n *nasEconomyDriver) CheckModify(*backends.Modify) error { return errEconomyModify(n.Driver()) }

// ModifyVolume implements backends.Modifier: nothing can change.
func (n *nasEconomyDriver) ModifyVolume(context.Context, *backends.Volume, *backends.Modify) error {
	return errEconomyModify(n.Driver())
}

// CheckModify implements backends.Modifier: nothing can change.
func (s *sanEconomyDriver) CheckModify(*backends.Modify) error { return errEconomyModify(s.Driver()) }

// ModifyVolume implements backends.Modifier: nothing can change.
func (s *sanEconomyDriver) ModifyVolume(context.Context, *backends.Volume, *backends.Modify) error {
	return errEconomyModify(s.Driver())
}

func checkPermissions(m *backends.Modify) error {
	if m.UnixPermissions == nil {
		return nil
	}
	if _, err := config.ParseUnixPermissions(*m.UnixPermissions); err != nil {
		return backends.Errorf(backends.ErrInvalid, "unixPermissions %q: want octal (0755) or symbolic (---rwxr-xr-x)", *m.UnixPermissions)
	}
	return nil
}

// modifyFlexVol applies m to the FlexVol of vol, and with lun its QoS
// policy group to the volume's LUN. factor and lun size the FlexVol as
// fitFlexVol does when the snapshot reserve changes.
func (d *driver) modifyFlexVol(ctx context.Context, vol *backends.Volume, m *backends.Modify, factor float64, lun bool) error {
	h := handleOf(vol)
	if h == nil {
		return backends.Errorf(backends.ErrInvalid, "volume %s has no handle", vol.ID)
	}
	qos, err := d.checkReferences(ctx, m)
	if err != nil {
		return err
	}
	var lunQoS *rest.LUN
	vm := d.volumeChanges(h.vol, m)
	if qos != nil && lun {
		if lunQoS, err = d.client.GetLUN(ctx, lunPath(h.vol.Name)); err != nil {
			return d.failure(err, "reading the LUN of volume %s", vol.ID)
		}
		if qosName(lunQoS.QoSPolicy) == *qos {
			lunQoS = nil
		}
	} else if qos != nil && qosName(h.vol.QoSPolicy) != *qos {
		vm.QoSPolicy = qos
	}
	if err := d.fitReserve(ctx, vol, &vm, factor, lun); err != nil {
		return err
	}
	if vm != (rest.VolumeModify{}) {
		if err := d.client.ModifyVolume(ctx, h.vol.UUID, vm); err != nil {
			return d.failure(err, "modifying volume %s", vol.ID)
		}
	}
	if lunQoS != nil {
		if err := d.client.SetLUNQoSPolicy(ctx, lunQoS.UUID, *qos); err != nil {
			return d.failure(err, "setting the QoS policy group of the LUN of volume %s", vol.ID)
		}
	}
	return nil
}

// qosName is ONTAP's name for a policy group setting: "none" for none.
func qosName(p string) string {
	if p == "" {
		return backends.QoSNone
	}
	return p
}

// checkReferences makes sure that the policies m names exist for the SVM
// and are of the kind asked for, and returns the QoS policy group to set
// (nil: leave it).
func (d *driver) checkReferences(ctx context.Context, m *backends.Modify) (*string, error) {
	qos, adaptive := m.QoSPolicy, false
	if m.AdaptiveQoSPolicy != nil {
		qos, adaptive = m.AdaptiveQoSPolicy, true
	}
	if qos != nil && *qos != backends.QoSNone {
		p, err := d.client.GetQoSPolicy(ctx, *qos)
		if err != nil {
			return nil, d.createFailure(err, "looking up QoS policy group %s", *qos)
		}
		if p.Adaptive != adaptive {
			return nil, backends.Errorf(backends.ErrInvalid, "QoS policy group %s is %s; use %s", *qos, kindName(p.Adaptive), keyFor(p.Adaptive))
		}
	}
	if m.SnapshotPolicy != nil {
		ok, err := d.client.SnapshotPolicyExists(ctx, *m.SnapshotPolicy)
		if err != nil {
			return nil, d.failure(err, "looking up snapshot policy %s", *m.SnapshotPolicy)
		}
		if !ok {
			return nil, backends.Errorf(backends.ErrInvalid, "snapshot policy %s does not exist on SVM %s", *m.SnapshotPolicy, d.cfg.SVM)
		}
	}
	if m.ExportPolicy != nil {
		if _, err := d.client.GetExportPolicy(ctx, *m.ExportPolicy); err != nil {
			return nil, d.createFailure(err, "looking up export policy %s", *m.ExportPolicy)
		}
	}
	return qos, nil
}

func kindName(adaptive bool) string {
	if adaptive {
		return "an adaptive group"
	}
	return "a fixed group"
}

func keyFor(adaptive bool) string {
	if adaptive {
		return "adaptiveQosPolicy"
	}
	return "qosPolicy"
}

// volumeChanges is the PATCH of the FlexVol attributes of m that differ
// from v (all but the QoS policy group and the size).
func (d *driver) volumeChanges(v *rest.Volume, m *backends.Modify) rest.VolumeModify {
	var vm rest.VolumeModify
	if p := m.SnapshotPolicy; p != nil && *p != v.SnapshotPolicy {
		vm.SnapshotPolicy = p
	}
	if r := m.SnapshotReserve; r != nil && *r != v.SnapshotReservePercent {
		vm.SnapshotReservePercent = r
	}
	if t := m.TieringPolicy; t != nil && *t != v.TieringPolicy {
		vm.TieringPolicy = t
	}
	if s := m.SnapshotDir; s != nil && *s != v.SnapshotDirAccess {
		vm.SnapshotDirAccess = s
	}
	if p := m.ExportPolicy; p != nil && *p != v.ExportPolicy {
		vm.ExportPolicy = p
	}
	if m.UnixPermissions != nil {
		// Checked by CheckModify; ONTAP reports octal digits ("755").
		perms, _ := config.ParseUnixPermissions(*m.UnixPermissions)
		if strings.TrimLeft(perms, "0") != strings.TrimLeft(v.UnixPermissions, "0") {
			vm.UnixPermissions = &perms
		}
	}
	return vm
}

// fitReserve grows the FlexVol in the same PATCH when a new snapshot
// reserve would leave less than the volume's size usable: the reserve is
// carved from the FlexVol (ONTAP), and the CO's size must stay usable. A
// smaller reserve leaves the FlexVol as it is (never shrunk).
func (d *driver) fitReserve(ctx context.Context, vol *backends.Volume, vm *rest.VolumeModify, factor float64, lun bool) error {
	if vm.SnapshotReservePercent == nil {
		return nil
	}
	h := handleOf(vol)
	want, large, err := d.fitFlexVol(vol.SizeBytes, *vm.SnapshotReservePercent, factor, lun)
	if err != nil || want <= h.vol.Size {
		return err
	}
	if len(h.vol.Aggregates) > 0 {
		if err := d.checkAggregateLimit(ctx, h.vol.Aggregates[0], h.vol.SpaceReserve, want-h.vol.Size); err != nil {
			return err
		}
	}
	vm.Size, vm.LargeSize = &want, large
	return nil
}
