package rest

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// Volume is a FlexVol as the drivers see it. Sizes are bytes.
type Volume struct {
	UUID                   string
	Name                   string
	State                  string // online, offline, restricted, error
	Size                   int64
	Used                   int64
	Available              int64
	LogicalUsed            int64 // space.logical_space.used: used before efficiency
	Comment                string
	Aggregates             []string
	JunctionPath           string // nas.path; "" when unmounted
	ExportPolicy           string
	SecurityStyle          string
	UnixPermissions        string // octal digits, e.g. "755"
	SpaceReserve           string // guarantee.type: "none" (thin) or "volume" (thick)
	SnapshotPolicy         string
	SnapshotReservePercent int
	SnapshotUsed           int64
	SnapshotDirAccess      bool
	Encrypted              bool
	TieringPolicy          string
	QoSPolicy              string
	IsClone                bool
	CloneParentVolume      string
	CloneParentSnapshot    string
	CloneSplitInitiated    bool
	QuotaState             string // off, initializing, on, ...
}

// VolumeCreate describes a new FlexVol. Empty or nil fields are left to
// ONTAP's defaults.
type VolumeCreate struct {
	Name                   string
	Aggregate              string
	Size                   int64
	SpaceReserve           string // "none" or "volume"
	SnapshotPolicy         string
	SnapshotReservePercent *int
	SnapshotDirAccess      *bool
	UnixPermissions        string // octal digits, e.g. "755"
	ExportPolicy           string
	SecurityStyle          string // unix, mixed, ntfs
	JunctionPath           string // "" creates the volume unmounted
	Comment                string
	Encryption             *bool
	TieringPolicy          string // ONTAP's names: none, auto, snapshot_only, all, backup
	QoSPolicy              string
	LargeSize              bool // space.large_size_enabled (ONTAP 9.12.1+)
}

// VolumeClone describes a FlexClone of an existing volume.
type VolumeClone struct {
	Name           string
	ParentVolume   string
	ParentSnapshot string // "" lets ONTAP take a new snapshot of the parent
}

// VolumeModify lists the volume attributes to change; nil fields are left
// alone. Several fields in one call cost one round trip.
type VolumeModify struct {
	Name              *string // rename
	Size              *int64
	JunctionPath      *string // "" unmounts
	ExportPolicy      *string
	UnixPermissions   *string // octal digits, e.g. "755"
	Comment           *string
	SnapshotDirAccess *bool
	SnapshotPolicy    *string
	// SnapshotReservePercent: up to 90 here, although ONTAP allows more
	// after creation (docs/design/ontap-rest.md §3.5).
	SnapshotReservePercent *int
	TieringPolicy          *string // ONTAP's names: none, auto, snapshot_only, all, backup
	QoSPolicy              *string // "none" removes the volume's policy group
	SplitClone             bool    // start splitting a FlexClone from its parent
	LargeSize              bool    // enable space.large_size_enabled (ONTAP 9.12.1+)
}

type nameRef struct {
	Name string `json:"name,omitempty"`
	UUID string `json:"uuid,omitempty"`
}

// volumeFields is what GetVolume and ListVolumes ask for; several are
// "expensive" fields that ONTAP only returns when named.
const volumeFields = "uuid,name,state,size,comment,aggregates,nas.path,nas.export_policy.name,nas.security_style," +
	"nas.unix_permissions,guarantee.type,snapshot_policy.name,snapshot_directory_access_enabled,space.used," +
	"space.available,space.snapshot.reserve_percent,space.snapshot.used,space.logical_space.used,encryption.enabled," +
	"tiering.policy,qos.policy.name,clone.is_flexclone,clone.parent_volume.name,clone.parent_snapshot.name," +
	"clone.split_initiated,quota.state"

type volumeWire struct {
	UUID       string    `json:"uuid"`
	Name       string    `json:"name"`
	State      string    `json:"state"`
	Size       int64     `json:"size"`
	Comment    string    `json:"comment"`
	Aggregates []nameRef `json:"aggregates"`
	NAS        struct {
		Path            string  `json:"path"`
		SecurityStyle   string  `json:"security_style"`
		UnixPermissions *int    `json:"unix_permissions"`
		ExportPolicy    nameRef `json:"export_policy"`
	} `json:"nas"`
	Guarantee struct {
		Type string `json:"type"`
	} `json:"guarantee"`
	SnapshotPolicy    nameRef `json:"snapshot_policy"`
	SnapshotDirAccess bool    `json:"snapshot_directory_access_enabled"`
	Space             struct {
		Used      int64 `json:"used"`
		Available int64 `json:"available"`
		Snapshot  struct {
			ReservePercent int   `json:"reserve_percent"`
			Used           int64 `json:"used"`
		} `json:"snapshot"`
		LogicalSpace struct {
			Used int64 `json:"used"`
		} `json:"logical_space"`
	} `json:"space"`
	Encryption struct {
		Enabled bool `json:"enabled"`
	} `json:"encryption"`
	Tiering struct {
		Policy string `json:"policy"`
	} `json:"tiering"`
	QoS struct {
		Policy nameRef `json:"policy"`
	} `json:"qos"`
	Clone struct {
		IsFlexclone    bool    `json:"is_flexclone"`
		ParentVolume   nameRef `json:"parent_volume"`
		ParentSnapshot nameRef `json:"parent_snapshot"`
		SplitInitiated bool    `json:"split_initiated"`
	} `json:"clone"`
	Quota struct {
		State string `json:"state"`
	} `json:"quota"`
}

func (w *volumeWire) volume() Volume {
	v := Volume{
		UUID: w.UUID, Name: w.Name, State: w.State, Size: w.Size, Comment: w.Comment,
		Used: w.Space.Used, Available: w.Space.Available, LogicalUsed: w.Space.LogicalSpace.Used,
		JunctionPath: w.NAS.Path, ExportPolicy: w.NAS.ExportPolicy.Name, SecurityStyle: w.NAS.SecurityStyle,
		SpaceReserve: w.Guarantee.Type, SnapshotPolicy: w.SnapshotPolicy.Name,
		SnapshotReservePercent: w.Space.Snapshot.ReservePercent, SnapshotUsed: w.Space.Snapshot.Used,
		SnapshotDirAccess: w.SnapshotDirAccess, Encrypted: w.Encryption.Enabled, TieringPolicy: w.Tiering.Policy,
		QoSPolicy: w.QoS.Policy.Name, IsClone: w.Clone.IsFlexclone, CloneParentVolume: w.Clone.ParentVolume.Name,
		CloneParentSnapshot: w.Clone.ParentSnapshot.Name, CloneSplitInitiated: w.Clone.SplitInitiated,
		QuotaState: w.Quota.State,
	}
	if w.NAS.UnixPermissions != nil {
		v.UnixPermissions = strconv.Itoa(*w.NAS.UnixPermissions)
	}
	for _, a := range w.Aggregates {
		v.Aggregates = append(v.Aggregates, a.Name)
	}
	return v
}

// unixPermissionsWire converts octal digits ("755", "0777") to ONTAP's
// unix_permissions integer, whose decimal digits are the octal ones (755).
func unixPermissionsWire(s string) (int, error) {
	if s == "" || len(s) > 4 {
		return 0, fmt.Errorf("unix permissions %q are not 1 to 4 octal digits", s)
	}
	for _, r := range s {
		if r < '0' || r > '7' {
			return 0, fmt.Errorf("unix permissions %q are not 1 to 4 octal digits", s)
		}
	}
	return strconv.Atoi(s)
}

// CreateVolume creates a FlexVol (POST /storage/volumes, an asynchronous
// job). It returns once the job has finished; use GetVolume for the UUID.
// If ONTAP reports the name taken, the error is ClassAlreadyExists, unless the
// volume was created by an earlier attempt of this very call whose response
// got lost, which counts as success.
func (c *Client) CreateVolume(ctx context.Context, v VolumeCreate) error {
	svm, err := c.svm(ctx)
	if err != nil {
		return err
	}
	body, err := volumeBody(v, "POST /storage/volumes")
	if err != nil {
		return err
	}
	body["svm"], body["style"] = nameRef{UUID: svm}, "flexvol"
	if v.Aggregate != "" {
		body["aggregates"] = []nameRef{{Name: v.Aggregate}}
	}
	if v.Size > 0 {
		body["size"] = v.Size
	}
	err = c.mutate(ctx, http.MethodPost, "/storage/volumes", "/storage/volumes", nil, body, nil)
	return c.resolveCreate(ctx, err, func(ctx context.Context) error {
		_, err := c.GetVolume(ctx, v.Name)
		return err
	})
}

// CreateVolumeBalanced creates a FlexVol that ONTAP places on an aggregate
// of its choice: an application container of one volume (POST
// /application/containers, ONTAP 9.19.1+), which is how Trident's
// useBalancedPlacement creates volumes. v.Aggregate must be empty. Errors
// as for CreateVolume.
func (c *Client) CreateVolumeBalanced(ctx context.Context, v VolumeCreate) error {
	const endpoint = "/application/containers"
	if v.Aggregate != "" {
		return &Error{Class: ClassInvalid, Endpoint: "POST " + endpoint, Message: "balanced placement chooses the aggregate; none may be given"}
	}
	svm, err := c.svm(ctx)
	if err != nil {
		return err
	}
	vol, err := volumeBody(v, "POST "+endpoint)
	if err != nil {
		return err
	}
	space, _ := vol["space"].(map[string]any)
	if space == nil {
		space = map[string]any{}
	}
	if v.Size > 0 {
		space["size"] = v.Size
	}
	if len(space) > 0 {
		vol["space"] = space
	}
	vol["type"], vol["scale_out"] = "rw", false
	body := map[string]any{"svm": nameRef{UUID: svm}, "volumes": []map[string]any{vol}}
	err = c.mutate(ctx, http.MethodPost, endpoint, endpoint, nil, body, nil)
	return c.resolveCreate(ctx, err, func(ctx context.Context) error {
		_, err := c.GetVolume(ctx, v.Name)
		return err
	})
}

// volumeBody is what a FlexVol create and a container's volume share.
func volumeBody(v VolumeCreate, endpoint string) (map[string]any, error) {
	body := map[string]any{"name": v.Name}
	if v.SpaceReserve != "" {
		body["guarantee"] = map[string]string{"type": v.SpaceReserve}
	}
	if v.SnapshotPolicy != "" {
		body["snapshot_policy"] = nameRef{Name: v.SnapshotPolicy}
	}
	space := map[string]any{}
	if v.SnapshotReservePercent != nil {
		space["snapshot"] = map[string]int{"reserve_percent": *v.SnapshotReservePercent}
	}
	if v.LargeSize {
		space["large_size_enabled"] = true
	}
	if len(space) > 0 {
		body["space"] = space
	}
	if v.SnapshotDirAccess != nil {
		body["snapshot_directory_access_enabled"] = *v.SnapshotDirAccess
	}
	nas, err := volumeNAS(v)
	if err != nil {
		return nil, &Error{Class: ClassInvalid, Endpoint: endpoint, Message: err.Error()}
	}
	if len(nas) > 0 {
		body["nas"] = nas
	}
	if v.Comment != "" {
		body["comment"] = v.Comment
	}
	if v.Encryption != nil {
		body["encryption"] = map[string]bool{"enabled": *v.Encryption}
	}
	if v.TieringPolicy != "" {
		body["tiering"] = map[string]string{"policy": v.TieringPolicy}
	}
	if v.QoSPolicy != "" {
		body["qos"] = map[string]any{"policy": nameRef{Name: v.QoSPolicy}}
	}
	return body, nil
}

// volumeNAS is the nas object of a create.
func volumeNAS(v VolumeCreate) (map[string]any, error) {
	nas := map[string]any{}
	if v.UnixPermissions != "" {
		perms, err := unixPermissionsWire(v.UnixPermissions)
		if err != nil {
			return nil, err
		}
		nas["unix_permissions"] = perms
	}
	if v.ExportPolicy != "" {
		nas["export_policy"] = nameRef{Name: v.ExportPolicy}
	}
	if v.SecurityStyle != "" {
		nas["security_style"] = v.SecurityStyle
	}
	if v.JunctionPath != "" {
		nas["path"] = v.JunctionPath
	}
	return nas, nil
}

// CloneVolume creates a FlexClone (POST /storage/volumes with clone{...}).
// Errors as for CreateVolume.
func (c *Client) CloneVolume(ctx context.Context, v VolumeClone) error {
	svm, err := c.svm(ctx)
	if err != nil {
		return err
	}
	clone := map[string]any{"parent_volume": nameRef{Name: v.ParentVolume}, "is_flexclone": true}
	if v.ParentSnapshot != "" {
		clone["parent_snapshot"] = nameRef{Name: v.ParentSnapshot}
	}
	body := map[string]any{"name": v.Name, "svm": nameRef{UUID: svm}, "clone": clone}
	err = c.mutate(ctx, http.MethodPost, "/storage/volumes", "/storage/volumes", nil, body, nil)
	return c.resolveCreate(ctx, err, func(ctx context.Context) error {
		_, err := c.GetVolume(ctx, v.Name)
		return err
	})
}

// GetVolume returns the SVM's volume called name; NotFound if there is none.
func (c *Client) GetVolume(ctx context.Context, name string) (*Volume, error) {
	lit, err := queryLiteral(name)
	if err != nil {
		return nil, err
	}
	vols, err := c.listVolumes(ctx, lit)
	if err != nil {
		return nil, err
	}
	switch len(vols) {
	case 0:
		return nil, notFound("/storage/volumes", "volume", name)
	case 1:
		return &vols[0], nil
	}
	return nil, &Error{Class: ClassUnknown, Endpoint: "GET /storage/volumes",
		Message: fmt.Sprintf("%d volumes are called %q", len(vols), name)}
}

// ListVolumes returns the SVM's FlexVols whose names start with prefix,
// following pagination.
func (c *Client) ListVolumes(ctx context.Context, prefix string) ([]Volume, error) {
	if err := checkPrefix(prefix); err != nil {
		return nil, err
	}
	return c.listVolumes(ctx, prefix+"*")
}

// checkPrefix refuses a volume name prefix with query operators in it: a
// prefix filter is the prefix followed by the wildcard, which no literal
// can hold.
func checkPrefix(prefix string) error {
	if lit, err := queryLiteral(prefix); err != nil || lit != prefix {
		return &Error{Class: ClassInvalid, Endpoint: "GET /storage/volumes",
			Message: fmt.Sprintf("volume name prefix %q contains query operators", prefix)}
	}
	return nil
}

func (c *Client) listVolumes(ctx context.Context, nameQuery string) ([]Volume, error) {
	svm, err := c.svm(ctx)
	if err != nil {
		return nil, err
	}
	recs, err := list[volumeWire](ctx, c, "/storage/volumes", "/storage/volumes", url.Values{
		"svm.uuid": {svm},
		"name":     {nameQuery},
		"style":    {"flexvol"},
		"fields":   {volumeFields},
	})
	if err != nil {
		return nil, err
	}
	vols := make([]Volume, 0, len(recs))
	for i := range recs {
		vols = append(vols, recs[i].volume())
	}
	return vols, nil
}

// ModifyVolume changes the attributes set in m (PATCH /storage/volumes/{uuid}).
func (c *Client) ModifyVolume(ctx context.Context, uuid string, m VolumeModify) error {
	const endpoint = "/storage/volumes/{uuid}"
	body, err := volumeModifyBody(m)
	if err != nil {
		return &Error{Class: ClassInvalid, Endpoint: "PATCH " + endpoint, Message: err.Error()}
	}
	if len(body) == 0 {
		return &Error{Class: ClassInvalid, Endpoint: "PATCH " + endpoint, Message: "nothing to modify"}
	}
	path, err := instancePath("/storage/volumes/", uuid, "PATCH "+endpoint)
	if err != nil {
		return err
	}
	_, err = wasAmbiguous(c.mutate(ctx, http.MethodPatch, endpoint, path, nil, body, nil))
	return err
}

// volumeModifyBody is the body of a volume PATCH: every change in one.
func volumeModifyBody(m VolumeModify) (map[string]any, error) {
	body := map[string]any{}
	set := func(key string, v any, ok bool) {
		if ok {
			body[key] = v
		}
	}
	set("name", deref(m.Name), m.Name != nil)
	set("size", deref(m.Size), m.Size != nil)
	set("comment", deref(m.Comment), m.Comment != nil)
	set("snapshot_directory_access_enabled", deref(m.SnapshotDirAccess), m.SnapshotDirAccess != nil)
	set("snapshot_policy", nameRef{Name: deref(m.SnapshotPolicy)}, m.SnapshotPolicy != nil)
	set("tiering", map[string]string{"policy": deref(m.TieringPolicy)}, m.TieringPolicy != nil)
	set("qos", map[string]any{"policy": nameRef{Name: deref(m.QoSPolicy)}}, m.QoSPolicy != nil)
	set("clone", map[string]bool{"split_initiated": true}, m.SplitClone)
	nas := map[string]any{}
	if m.JunctionPath != nil {
		nas["path"] = *m.JunctionPath
	}
	if m.ExportPolicy != nil {
		nas["export_policy"] = nameRef{Name: *m.ExportPolicy}
	}
	if m.UnixPermissions != nil {
		perms, err := unixPermissionsWire(*m.UnixPermissions)
		if err != nil {
			return nil, err
		}
		nas["unix_permissions"] = perms
	}
	set("nas", nas, len(nas) > 0)
	space := map[string]any{}
	if m.LargeSize {
		space["large_size_enabled"] = true
	}
	if m.SnapshotReservePercent != nil {
		space["snapshot"] = map[string]int{"reserve_percent": *m.SnapshotReservePercent}
	}
	set("space", space, len(space) > 0)
	return body, nil
}

// deref is the value of p, or its zero value for nil.
func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// DeleteVolume deletes a volume (DELETE /storage/volumes/{uuid}); force skips
// ONTAP's recovery queue. A volume with FlexClones fails with ClassInUse; a
// missing one with ClassNotFound.
func (c *Client) DeleteVolume(ctx context.Context, uuid string, force bool) error {
	const endpoint = "/storage/volumes/{uuid}"
	path, err := instancePath("/storage/volumes/", uuid, "DELETE "+endpoint)
	if err != nil {
		return err
	}
	var q url.Values
	if force {
		q = url.Values{"force": {"true"}}
	}
	return resolveDelete(c.mutate(ctx, http.MethodDelete, endpoint, path, q, nil, nil))
}

// instancePath appends one escaped path segment, refusing values that are
// not plain identifiers.
func instancePath(prefix, id, endpoint string) (string, error) {
	if !validPathSegment(id) {
		return "", &Error{Class: ClassInvalid, Endpoint: endpoint, Message: fmt.Sprintf("invalid identifier %q", id)}
	}
	return prefix + url.PathEscape(id), nil
}

// resolveCreate turns the outcome of a create into the caller's answer. An
// AlreadyExists that follows an ambiguous earlier attempt means that attempt
// created the object: wait until it is visible (an asynchronous create may
// still be running) and report success.
func (c *Client) resolveCreate(ctx context.Context, err error, lookup func(context.Context) error) error {
	ambiguous, err := wasAmbiguous(err)
	if err == nil || !ambiguous || !IsAlreadyExists(err) {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	delay := c.cfg.JobPollInitial
	for {
		lerr := lookup(ctx)
		if lerr == nil {
			return nil
		}
		if !IsNotFound(lerr) {
			return lerr
		}
		if serr := c.sleep(ctx, delay); serr != nil {
			return err
		}
		delay = min(2*delay, c.cfg.JobPollMax)
	}
}

// resolveDelete treats NotFound after an ambiguous earlier attempt as
// success: that attempt did the delete.
func resolveDelete(err error) error {
	ambiguous, err := wasAmbiguous(err)
	if ambiguous && IsNotFound(err) {
		return nil
	}
	return err
}
