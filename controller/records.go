package controller

import (
	"context"

	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/backends"
)

// VolumeRecords reads what Kubernetes or Trident recorded of a volume.
type VolumeRecords interface {
	// Record returns what volume id's PersistentVolume (volume attribute
	// internalName) or Trident's TridentVolume records; the zero record
	// when there is none.
	Record(ctx context.Context, id string) (VolumeRecord, error)
}

// RecordLister is VolumeRecords that can list them all at once. ListVolumes
// needs it: a backend lists the volumes its naming rule names, and only the
// records tell which volume another ONTAP name holds.
type RecordLister interface {
	// ListRecords returns, by volume ID, the records that name the
	// volume's ONTAP name.
	ListRecords(ctx context.Context) (map[string]VolumeRecord, error)
}

// VolumeRecord is what the records say of a volume.
type VolumeRecord struct {
	// InternalName is the volume's name on the storage system.
	InternalName string
	// NotManaged marks Trident's unmanaged import (importNotManaged):
	// the volume is served, but never deleted, resized, snapshotted or
	// cloned on the storage system.
	NotManaged bool
}

// record is what volume id's records say; the zero record when none
// names it and the backends' naming rule applies. Trident names a volume
// otherwise with a nameTemplate, an import with --no-rename or an older
// storagePrefix, and records the name (docs/design/trident-compat.md
// §4.1). A record once read is kept until the volume is deleted: a PV's
// volume attributes cannot change.
func (s *Service) record(ctx context.Context, id string) (VolumeRecord, error) {
	if s.records == nil {
		return VolumeRecord{}, nil
	}
	if r, ok := s.recordCache.Load(id); ok {
		return r.(VolumeRecord), nil
	}
	r, err := s.records.Record(ctx, id)
	if err != nil {
		// Guessing by the naming rule could call a volume that is
		// there gone: the CO retries instead.
		return VolumeRecord{}, backends.Errorf(backends.ErrUnavailable, "reading the records of volume %s: %w", id, err)
	}
	if r.InternalName != "" {
		logrus.WithContext(ctx).WithFields(logrus.Fields{"volume": id, "internalName": r.InternalName, "notManaged": r.NotManaged}).
			Debug("volume named by its records")
		s.recordCache.Store(id, r)
	}
	return r, nil
}

// managed refuses to change an unmanaged import on the storage system, as
// Trident does (its NotManagedError).
func (f *found) managed(change string) error {
	if f.notManaged {
		return failedPrecondition("volume %s is an unmanaged import (Trident's importNotManaged): it is not %s", f.vol.ID, change)
	}
	return nil
}

// volumeOn asks backend b for volume id: at the name its records give,
// where b can look there, else by b's naming rule.
func volumeOn(ctx context.Context, b backends.Backend, id, internalName string) (*backends.Volume, error) {
	if l, ok := b.(backends.VolumeLocator); ok && internalName != "" {
		return l.VolumeAt(ctx, id, internalName)
	}
	return b.Volume(ctx, id)
}
