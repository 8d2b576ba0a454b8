package ontap

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// The ONTAP volume comment is where a stateless controller keeps what it
// must remember of a volume. Trident writes its pool labels there as
//
//	{"provisioning":{"<label>":"<value>",...}}
//
// and reads a comment back as map[string]map[string]string. We add one more
// object in the same shape, so Trident still parses our comments and we
// recognise Trident's (which have no such object):
//
//	{"ontap-csi":{"name":"pvc-…","size":"1073741824","access":"mount","fsType":"ext4",…},
//	 "provisioning":{…}}
const (
	commentProvisioning = "provisioning"
	commentMeta         = "ontap-csi"
	maxCommentLen       = 1023 // ONTAP's limit for volume comments
	metaVersion         = "1"
)

// volumeMeta is what a volume remembers of its creation.
type volumeMeta struct {
	Name             string // CSI name = volume ID
	Size             int64  // usable bytes the CO asked for
	AccessType       string // mount or block
	FSType           string // block protocol only; "raw" for raw block
	SourceSnapshotID string // CSI ID of the snapshot it was cloned from
	SourceVolumeID   string // CSI ID of the volume it was cloned from
	Pool             string
	Backend          string
	// Topologies are where the volume is reachable from when a requisite
	// topology narrowed its pool's; nil means the pool's. A retried
	// CreateVolume and ListVolumes must answer what the first create did.
	Topologies []map[string]string
	// SkipRecoveryQueue, when set, overrides the pool's default at delete.
	SkipRecoveryQueue *bool
	// InternalName is the FlexVol's name when the naming rule does not
	// give it (a nameTemplate's): a copy of the comment on another FlexVol
	// (a FlexClone made by hand) is then not taken for the volume.
	InternalName string
}

func (m *volumeMeta) fields() map[string]string {
	f := map[string]string{"version": metaVersion, "name": m.Name, "size": strconv.FormatInt(m.Size, 10)}
	for k, v := range map[string]string{
		"access": m.AccessType, "fsType": m.FSType, "sourceSnapshot": m.SourceSnapshotID,
		"sourceVolume": m.SourceVolumeID, "pool": m.Pool, "backend": m.Backend,
		"topology": encodeTopologies(m.Topologies), "skipRecoveryQueue": formatBoolPtr(m.SkipRecoveryQueue),
		"internalName": m.InternalName,
	} {
		if v != "" {
			f[k] = v
		}
	}
	return f
}

// encodeComment renders the comment of a volume. It fails if the result
// exceeds ONTAP's limit (long labels).
func encodeComment(labels map[string]string, m *volumeMeta) (string, error) {
	c := map[string]map[string]string{commentMeta: m.fields()}
	if len(labels) > 0 {
		c[commentProvisioning] = labels
	}
	b, err := json.Marshal(c) // map keys are sorted: the output is deterministic
	if err != nil {
		return "", err
	}
	if len(b) > maxCommentLen {
		return "", fmt.Errorf("volume comment would be %d characters, ONTAP allows %d; shorten the backend's labels", len(b), maxCommentLen)
	}
	return string(b), nil
}

// decodeComment reads a volume comment. meta is nil when the comment holds
// no record of ours (a volume Trident or someone else made); labels are
// Trident's provisioning labels, if any.
func decodeComment(comment string) (labels map[string]string, meta *volumeMeta) {
	var c map[string]map[string]string
	if comment == "" || json.Unmarshal([]byte(comment), &c) != nil {
		return nil, nil
	}
	labels = c[commentProvisioning]
	f, ok := c[commentMeta]
	if !ok || f["name"] == "" {
		return labels, nil
	}
	size, _ := strconv.ParseInt(f["size"], 10, 64)
	return labels, &volumeMeta{
		Name: f["name"], Size: max(size, 0), AccessType: f["access"], FSType: f["fsType"],
		SourceSnapshotID: f["sourceSnapshot"], SourceVolumeID: f["sourceVolume"], Pool: f["pool"], Backend: f["backend"],
		Topologies: decodeTopologies(f["topology"]), SkipRecoveryQueue: parseBoolPtr(f["skipRecoveryQueue"]),
		InternalName: f["internalName"],
	}
}

func formatBoolPtr(b *bool) string {
	if b == nil {
		return ""
	}
	return strconv.FormatBool(*b)
}

// parseBoolPtr reads what formatBoolPtr wrote; anything else is unset.
func parseBoolPtr(s string) *bool {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return nil
	}
	return &b
}

// encodeTopologies writes topologies compactly, as the comment's values
// must be strings (Trident reads them as map[string]map[string]string) and
// ONTAP caps the comment at 1023 characters: "k=v,k=v;k=v". Topology keys
// and values are Kubernetes label keys and values, which never hold '=',
// ',' or ';'.
func encodeTopologies(ts []map[string]string) string {
	segs := make([]string, 0, len(ts))
	for _, t := range ts {
		kv := make([]string, 0, len(t))
		for _, k := range slices.Sorted(maps.Keys(t)) {
			kv = append(kv, k+"="+t[k])
		}
		segs = append(segs, strings.Join(kv, ","))
	}
	return strings.Join(segs, ";")
}

// decodeTopologies reads what encodeTopologies wrote; anything malformed
// reads as nil, so the volume falls back to its pool's topologies.
func decodeTopologies(s string) []map[string]string {
	if s == "" {
		return nil
	}
	var ts []map[string]string
	for _, seg := range strings.Split(s, ";") {
		t := map[string]string{}
		for _, kv := range strings.Split(seg, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return nil
			}
			t[k] = v
		}
		ts = append(ts, t)
	}
	return ts
}
