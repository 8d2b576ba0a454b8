package backends

import "context"

// Modify lists changes to the attributes of an existing volume (CSI
// ControllerModifyVolume, Kubernetes VolumeAttributesClass). Nil fields
// stay as they are.
type Modify struct {
	// QoSPolicy and AdaptiveQoSPolicy name a fixed or an adaptive QoS
	// policy group; at most one is set. QoSNone removes the volume's.
	QoSPolicy         *string
	AdaptiveQoSPolicy *string
	SnapshotPolicy    *string
	SnapshotReserve   *int // percent
	TieringPolicy     *string
	SnapshotDir       *bool
	UnixPermissions   *string
	ExportPolicy      *string
}

// QoSNone as QoSPolicy removes a volume's QoS policy group (ONTAP's
// word for none).
const QoSNone = "none"

// Empty reports whether m changes nothing.
func (m *Modify) Empty() bool { return m == nil || *m == Modify{} }

// Modifier is a Backend that changes volumes in place.
type Modifier interface {
	// CheckModify refuses (ErrInvalid) what the backend can change on none
	// of its volumes, without asking the storage system: the keys its
	// driver does not support, or that its configuration owns.
	CheckModify(m *Modify) error
	// ModifyVolume applies m to vol. It validates everything first, so a
	// refusal (ErrInvalid) changes nothing; what already holds is not
	// sent again, so a repeated call changes nothing either.
	ModifyVolume(ctx context.Context, vol *Volume, m *Modify) error
}
