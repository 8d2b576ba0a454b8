package ontap

import (
	"context"
	"net/url"
)

// This file holds collection reads spanning volumes that the drivers need
// and the per-object methods of the client do not offer.

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
	q := url.Values{
		"svm.uuid":    {svm},
		"volume.name": {queryLiteral(volumePrefix) + "*"},
		"fields":      {"uuid,name,create_time,volume.name,volume.uuid"},
	}
	if name != "" {
		q.Set("name", queryLiteral(name))
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
	if !IsNotFound(err) && !IsInvalid(err) {
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
			q.Set("name", queryLiteral(name))
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

// ListLUNs lists the SVM's LUNs whose path matches pattern (ONTAP query
// syntax, e.g. "/vol/trident_*/lun0").
func (c *Client) ListLUNs(ctx context.Context, pattern string) ([]LUN, error) {
	svm, err := c.svm(ctx)
	if err != nil {
		return nil, err
	}
	recs, err := list[lunWire](ctx, c, lunsEndpoint, lunsEndpoint, url.Values{
		"svm.uuid": {svm}, "name": {pattern}, "fields": {lunFields},
	})
	if err != nil {
		return nil, err
	}
	out := make([]LUN, 0, len(recs))
	for i := range recs {
		out = append(out, recs[i].lun())
	}
	return out, nil
}
