package rest

import (
	"context"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"time"
)

// LUN is a LUN as the drivers see it.
type LUN struct {
	UUID            string
	Path            string // "/vol/<volume>/<name>"
	VolumeName      string
	VolumeUUID      string
	Size            int64
	SerialNumber    string // 12 characters; the Linux WWID carries its hex form
	OSType          string
	State           string
	Mapped          bool
	SpaceReserve    bool // space.guarantee.requested
	SpaceAllocation bool // space.scsi_thin_provisioning_support_enabled
	Comment         string
	QoSPolicy       string
	CreateTime      time.Time
	// Attributes are read only by the calls that say so.
	Attributes map[string]string
}

// LUNCreate describes a new LUN.
type LUNCreate struct {
	Path            string // "/vol/<volume>/lun0"
	Size            int64
	OSType          string // default "linux"
	SpaceReserve    bool
	SpaceAllocation bool
	QoSPolicy       string
	Comment         string
	// Attributes are set with the LUN, in the same request (ONTAP 9.10+).
	Attributes map[string]string
}

const lunFields = "uuid,name,location.volume.name,location.volume.uuid,space.size,space.guarantee.requested," +
	"space.scsi_thin_provisioning_support_enabled,serial_number,os_type,status.state,status.mapped,comment,qos_policy.name," +
	"create_time"

type lunWire struct {
	UUID     string `json:"uuid"`
	Name     string `json:"name"`
	Location struct {
		Volume nameRef `json:"volume"`
	} `json:"location"`
	Space struct {
		Size      int64 `json:"size"`
		Guarantee struct {
			Requested bool `json:"requested"`
		} `json:"guarantee"`
		ThinProvisioningSupport bool `json:"scsi_thin_provisioning_support_enabled"`
	} `json:"space"`
	SerialNumber string `json:"serial_number"`
	OSType       string `json:"os_type"`
	Status       struct {
		State  string `json:"state"`
		Mapped bool   `json:"mapped"`
	} `json:"status"`
	Comment    string  `json:"comment"`
	QoSPolicy  nameRef `json:"qos_policy"`
	CreateTime string  `json:"create_time"`
	Attributes []struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"attributes"`
}

func (w *lunWire) lun() LUN {
	l := LUN{
		UUID: w.UUID, Path: w.Name, VolumeName: w.Location.Volume.Name, VolumeUUID: w.Location.Volume.UUID, Size: w.Space.Size,
		SerialNumber: w.SerialNumber, OSType: w.OSType, State: w.Status.State, Mapped: w.Status.Mapped,
		SpaceReserve: w.Space.Guarantee.Requested, SpaceAllocation: w.Space.ThinProvisioningSupport,
		Comment: w.Comment, QoSPolicy: w.QoSPolicy.Name,
	}
	if t, err := time.Parse(time.RFC3339, w.CreateTime); err == nil {
		l.CreateTime = t
	}
	if w.Attributes != nil {
		l.Attributes = make(map[string]string, len(w.Attributes))
		for _, a := range w.Attributes {
			l.Attributes[a.Name] = a.Value
		}
	}
	return l
}

const lunsEndpoint = "/storage/luns"

// CreateLUN creates a LUN and returns it, serial number included.
// ClassAlreadyExists if the path is taken.
func (c *Client) CreateLUN(ctx context.Context, l LUNCreate) (*LUN, error) {
	svm, err := c.svm(ctx)
	if err != nil {
		return nil, err
	}
	osType := l.OSType
	if osType == "" {
		osType = "linux"
	}
	space := map[string]any{
		"size":                                   l.Size,
		"guarantee":                              map[string]bool{"requested": l.SpaceReserve},
		"scsi_thin_provisioning_support_enabled": l.SpaceAllocation,
	}
	body := map[string]any{"name": l.Path, "os_type": osType, "space": space, "svm": nameRef{UUID: svm}}
	if l.QoSPolicy != "" {
		body["qos_policy"] = nameRef{Name: l.QoSPolicy}
	}
	if l.Comment != "" {
		body["comment"] = l.Comment
	}
	if len(l.Attributes) > 0 {
		attrs := make([]map[string]string, 0, len(l.Attributes))
		for _, k := range slices.Sorted(maps.Keys(l.Attributes)) {
			attrs = append(attrs, map[string]string{"name": k, "value": l.Attributes[k]})
		}
		body["attributes"] = attrs
	}
	var out collection[lunWire]
	err = c.mutate(ctx, http.MethodPost, lunsEndpoint, lunsEndpoint, url.Values{"return_records": {"true"}}, body, &out)
	if err = c.resolveCreate(ctx, err, func(ctx context.Context) error {
		_, err := c.GetLUN(ctx, l.Path)
		return err
	}); err != nil {
		return nil, err
	}
	// ONTAP ≤ 9.15 echoes the whole LUN; an asynchronous create (9.16+) or
	// a resolved resend does not.
	if len(out.Records) == 1 && out.Records[0].UUID != "" && out.Records[0].SerialNumber != "" {
		lun := out.Records[0].lun()
		return &lun, nil
	}
	return c.GetLUN(ctx, l.Path)
}

// GetLUN returns the LUN at path; NotFound if there is none.
func (c *Client) GetLUN(ctx context.Context, path string) (*LUN, error) {
	lit, err := queryLiteral(path)
	if err != nil {
		return nil, err
	}
	luns, err := c.ListLUNs(ctx, lit)
	if err != nil {
		return nil, err
	}
	if len(luns) == 0 {
		return nil, notFound(lunsEndpoint, "LUN", path)
	}
	return &luns[0], nil
}

// ListLUNs lists the SVM's LUNs whose path matches pattern (ONTAP query
// syntax, e.g. "/vol/trident_*/lun0").
func (c *Client) ListLUNs(ctx context.Context, pattern string) ([]LUN, error) {
	return c.listLUNs(ctx, pattern, lunFields)
}

// ListLUNsWithAttributes is ListLUNs with each LUN's attributes, read in
// the same request (ONTAP 9.10+ returns them when asked by name).
func (c *Client) ListLUNsWithAttributes(ctx context.Context, pattern string) ([]LUN, error) {
	return c.listLUNs(ctx, pattern, lunFields+",attributes")
}

func (c *Client) listLUNs(ctx context.Context, pattern, fields string) ([]LUN, error) {
	svm, err := c.svm(ctx)
	if err != nil {
		return nil, err
	}
	recs, err := list[lunWire](ctx, c, lunsEndpoint, lunsEndpoint, url.Values{
		"svm.uuid": {svm}, "name": {pattern}, "fields": {fields},
	})
	if err != nil {
		return nil, err
	}
	luns := make([]LUN, 0, len(recs))
	for i := range recs {
		luns = append(luns, recs[i].lun())
	}
	return luns, nil
}

// ResizeLUN grows a LUN to size bytes. Resizing to the current size succeeds
// (ONTAP's 1254226 is absorbed); shrinking fails with ClassInvalid.
func (c *Client) ResizeLUN(ctx context.Context, uuid string, size int64) error {
	const endpoint = lunsEndpoint + "/{uuid}"
	path, err := instancePath(lunsEndpoint+"/", uuid, "PATCH "+endpoint)
	if err != nil {
		return err
	}
	_, err = wasAmbiguous(c.mutate(ctx, http.MethodPatch, endpoint, path, nil,
		map[string]any{"space": map[string]int64{"size": size}}, nil))
	if hasCode(err, codeLUNSameSize) {
		return nil
	}
	return err
}

// deleteLUN deletes a LUN. A mapped LUN fails with ClassInUse unless
// allowMapped, which deletes its maps too.
func (c *Client) deleteLUN(ctx context.Context, uuid string, allowMapped bool) error {
	const endpoint = lunsEndpoint + "/{uuid}"
	path, err := instancePath(lunsEndpoint+"/", uuid, "DELETE "+endpoint)
	if err != nil {
		return err
	}
	var q url.Values
	if allowMapped {
		q = url.Values{"allow_delete_while_mapped": {"true"}}
	}
	return resolveDelete(c.mutate(ctx, http.MethodDelete, endpoint, path, q, nil, nil))
}

// LUNAttributes returns the name/value attributes stored on a LUN (Trident
// keeps the filesystem type in "com.netapp.ndvp.fstype").
func (c *Client) LUNAttributes(ctx context.Context, lunUUID string) (map[string]string, error) {
	const endpoint = lunsEndpoint + "/{uuid}/attributes"
	base, err := instancePath(lunsEndpoint+"/", lunUUID, "GET "+endpoint)
	if err != nil {
		return nil, err
	}
	type wire struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}
	recs, err := list[wire](ctx, c, endpoint, base+"/attributes", url.Values{"fields": {"name,value"}})
	if err != nil {
		return nil, err
	}
	attrs := make(map[string]string, len(recs))
	for _, r := range recs {
		attrs[r.Name] = r.Value
	}
	return attrs, nil
}

// SetLUNAttribute creates or replaces one LUN attribute.
func (c *Client) SetLUNAttribute(ctx context.Context, lunUUID, name, value string) error {
	const endpoint = lunsEndpoint + "/{uuid}/attributes"
	base, err := instancePath(lunsEndpoint+"/", lunUUID, "POST "+endpoint)
	if err != nil {
		return err
	}
	_, err = wasAmbiguous(c.mutate(ctx, http.MethodPost, endpoint, base+"/attributes", nil,
		map[string]string{"name": name, "value": value}, nil))
	if err == nil || !IsAlreadyExists(err) {
		return err
	}
	// The attribute exists (possibly from our own lost attempt): overwrite.
	path, perr := instancePath(base+"/attributes/", name, "PATCH "+endpoint+"/{name}")
	if perr != nil {
		return perr
	}
	_, err = wasAmbiguous(c.mutate(ctx, http.MethodPatch, endpoint+"/{name}", path, nil,
		map[string]string{"value": value}, nil))
	return err
}
