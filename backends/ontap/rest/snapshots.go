package rest

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Snapshot is a volume snapshot.
type Snapshot struct {
	UUID       string
	Name       string
	CreateTime time.Time
	Comment    string
}

type snapshotWire struct {
	UUID       string `json:"uuid"`
	Name       string `json:"name"`
	CreateTime string `json:"create_time"`
	Comment    string `json:"comment"`
}

func (w *snapshotWire) snapshot() Snapshot {
	s := Snapshot{UUID: w.UUID, Name: w.Name, Comment: w.Comment}
	// ONTAP writes ISO-8601 with an offset; a value we cannot read leaves
	// the zero time rather than failing the whole listing.
	if t, err := time.Parse(time.RFC3339, w.CreateTime); err == nil {
		s.CreateTime = t
	}
	return s
}

func snapshotsPath(volumeUUID, endpoint string) (string, error) {
	p, err := instancePath("/storage/volumes/", volumeUUID, endpoint)
	if err != nil {
		return "", err
	}
	return p + "/snapshots", nil
}

// CreateSnapshot takes a snapshot of a volume (an asynchronous job). Errors
// as for CreateVolume.
func (c *Client) CreateSnapshot(ctx context.Context, volumeUUID, name string) error {
	return c.CreateSnapshotWithComment(ctx, volumeUUID, name, "")
}

// CreateSnapshotWithComment is CreateSnapshot with a comment (ONTAP keeps
// up to 255 characters).
func (c *Client) CreateSnapshotWithComment(ctx context.Context, volumeUUID, name, comment string) error {
	const endpoint = "/storage/volumes/{uuid}/snapshots"
	path, err := snapshotsPath(volumeUUID, "POST "+endpoint)
	if err != nil {
		return err
	}
	svm, err := c.svm(ctx)
	if err != nil {
		return err
	}
	body := map[string]any{"name": name, "svm": nameRef{UUID: svm}}
	if comment != "" {
		body["comment"] = comment
	}
	err = c.mutate(ctx, http.MethodPost, endpoint, path, nil, body, nil)
	return c.resolveCreate(ctx, err, func(ctx context.Context) error {
		_, err := c.GetSnapshot(ctx, volumeUUID, name)
		return err
	})
}

// GetSnapshot returns a volume's snapshot by name; NotFound if absent.
func (c *Client) GetSnapshot(ctx context.Context, volumeUUID, name string) (*Snapshot, error) {
	q := url.Values{}
	if err := literalQuery(q, "name", name); err != nil {
		return nil, err
	}
	snaps, err := c.listSnapshots(ctx, volumeUUID, q)
	if err != nil {
		return nil, err
	}
	if len(snaps) == 0 {
		return nil, notFound("/storage/volumes/{uuid}/snapshots", "snapshot", name)
	}
	return &snaps[0], nil
}

// ListSnapshots returns all snapshots of a volume.
func (c *Client) ListSnapshots(ctx context.Context, volumeUUID string) ([]Snapshot, error) {
	return c.listSnapshots(ctx, volumeUUID, url.Values{})
}

func (c *Client) listSnapshots(ctx context.Context, volumeUUID string, q url.Values) ([]Snapshot, error) {
	const endpoint = "/storage/volumes/{uuid}/snapshots"
	path, err := snapshotsPath(volumeUUID, "GET "+endpoint)
	if err != nil {
		return nil, err
	}
	q.Set("fields", "uuid,name,create_time,comment")
	recs, err := list[snapshotWire](ctx, c, endpoint, path, q)
	if err != nil {
		return nil, err
	}
	snaps := make([]Snapshot, 0, len(recs))
	for i := range recs {
		snaps = append(snaps, recs[i].snapshot())
	}
	return snaps, nil
}

// VolumeSnapshot is a snapshot with the volume it belongs to.
type VolumeSnapshot struct {
	Snapshot
	VolumeName string
	VolumeUUID string
}

// ListAllSnapshots lists the snapshots of the SVM's volumes whose names
// start with volumePrefix, only those called name when name is set. It
// uses ONTAP's bulk endpoint, /storage/volumes/*/snapshots, in one request;
// where that endpoint is missing it reads the volumes one by one.
func (c *Client) ListAllSnapshots(ctx context.Context, volumePrefix, name string) ([]VolumeSnapshot, error) {
	const endpoint = "/storage/volumes/*/snapshots"
	svm, err := c.svm(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkPrefix(volumePrefix); err != nil {
		return nil, err
	}
	q := url.Values{
		"svm.uuid":    {svm},
		"volume.name": {volumePrefix + "*"},
		"fields":      {"uuid,name,create_time,comment,volume.name,volume.uuid"},
	}
	if name != "" {
		if err := literalQuery(q, "name", name); err != nil {
			return nil, err
		}
	}
	type wire struct {
		snapshotWire
		Volume nameRef `json:"volume"`
	}
	recs, err := list[wire](ctx, c, endpoint, endpoint, q)
	if err == nil {
		out := make([]VolumeSnapshot, 0, len(recs))
		for i := range recs {
			out = append(out, VolumeSnapshot{Snapshot: recs[i].snapshot(), VolumeName: recs[i].Volume.Name, VolumeUUID: recs[i].Volume.UUID})
		}
		return out, nil
	}
	if class := ClassOf(err); class != ClassNotFound && class != ClassInvalid {
		return nil, err
	}
	vols, err := c.ListVolumes(ctx, volumePrefix)
	if err != nil {
		return nil, err
	}
	var out []VolumeSnapshot
	for _, v := range vols {
		q := url.Values{}
		if name != "" {
			if err := literalQuery(q, "name", name); err != nil {
				return nil, err
			}
		}
		snaps, err := c.listSnapshots(ctx, v.UUID, q)
		if IsNotFound(err) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		for _, s := range snaps {
			out = append(out, VolumeSnapshot{Snapshot: s, VolumeName: v.Name, VolumeUUID: v.UUID})
		}
	}
	return out, nil
}

// DeleteSnapshot deletes a snapshot (an asynchronous job). A snapshot that
// backs a FlexClone fails with ClassInUse (ONTAP code 1638555).
func (c *Client) DeleteSnapshot(ctx context.Context, volumeUUID, snapshotUUID string) error {
	const endpoint = "/storage/volumes/{uuid}/snapshots/{uuid}"
	base, err := snapshotsPath(volumeUUID, "DELETE "+endpoint)
	if err != nil {
		return err
	}
	path, err := instancePath(base+"/", snapshotUUID, "DELETE "+endpoint)
	if err != nil {
		return err
	}
	return resolveDelete(c.mutate(ctx, http.MethodDelete, endpoint, path, nil, nil, nil))
}
