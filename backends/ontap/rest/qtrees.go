package rest

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// Qtree is an explicit qtree (docs/design/economy.md §1). The default
// qtree of each volume (id 0, name "") is never returned.
type Qtree struct {
	ID              int
	Name            string
	Volume          string
	VolumeUUID      string
	ExportPolicy    string // the policy in force (the volume's unless set)
	SecurityStyle   string
	UnixPermissions string // octal digits, e.g. "777"
	Path            string // junction path of the volume + "/" + name; "" while unmounted
}

// QtreeCreate describes a new qtree. Empty fields inherit the volume's.
type QtreeCreate struct {
	Volume          string
	Name            string
	UnixPermissions string // octal digits
	ExportPolicy    string
	SecurityStyle   string
	QoSPolicy       string
}

// QtreeModify lists the qtree attributes to change; nil fields are left
// alone.
type QtreeModify struct {
	Name         *string
	ExportPolicy *string
}

const (
	qtreesEndpoint = "/storage/qtrees"
	qtreeFields    = "id,name,volume.name,volume.uuid,export_policy.name,security_style,unix_permissions,path"
)

type qtreeWire struct {
	ID              int     `json:"id"`
	Name            string  `json:"name"`
	Volume          nameRef `json:"volume"`
	ExportPolicy    nameRef `json:"export_policy"`
	SecurityStyle   string  `json:"security_style"`
	UnixPermissions *int    `json:"unix_permissions"`
	Path            string  `json:"path"`
}

func (w *qtreeWire) qtree() Qtree {
	q := Qtree{
		ID: w.ID, Name: w.Name, Volume: w.Volume.Name, VolumeUUID: w.Volume.UUID, ExportPolicy: w.ExportPolicy.Name,
		SecurityStyle: w.SecurityStyle, Path: w.Path,
	}
	if w.UnixPermissions != nil {
		q.UnixPermissions = strconv.Itoa(*w.UnixPermissions)
	}
	return q
}

// CreateQtree creates a qtree (an asynchronous job). A create whose earlier
// attempt made the qtree succeeds. ONTAP documents no code of its own for a
// name that is taken: callers that need to know look the name up.
func (c *Client) CreateQtree(ctx context.Context, q QtreeCreate) error {
	svm, err := c.svm(ctx)
	if err != nil {
		return err
	}
	body := map[string]any{"name": q.Name, "volume": nameRef{Name: q.Volume}, "svm": nameRef{UUID: svm}}
	if q.UnixPermissions != "" {
		perms, err := unixPermissionsWire(q.UnixPermissions)
		if err != nil {
			return &Error{Class: ClassInvalid, Endpoint: "POST " + qtreesEndpoint, Message: err.Error()}
		}
		body["unix_permissions"] = perms
	}
	if q.ExportPolicy != "" {
		body["export_policy"] = nameRef{Name: q.ExportPolicy}
	}
	if q.SecurityStyle != "" {
		body["security_style"] = q.SecurityStyle
	}
	if q.QoSPolicy != "" {
		body["qos_policy"] = nameRef{Name: q.QoSPolicy}
	}
	err = c.mutate(ctx, http.MethodPost, qtreesEndpoint, qtreesEndpoint, nil, body, nil)
	ambiguous, err := wasAmbiguous(err)
	if err == nil || !ambiguous {
		return err
	}
	// A resent create whose first attempt made the qtree fails, with a
	// code ONTAP does not document: finding the qtree settles it.
	if vol, lerr := Literal(q.Volume); lerr != nil {
		return err
	} else if found, lerr := c.ListQtrees(ctx, vol, q.Name); lerr == nil && len(found) == 1 {
		return nil
	}
	return err
}

// ListQtrees lists the explicit qtrees whose volume matches volumePattern
// and whose name matches name (ONTAP query syntax; "" matches any).
func (c *Client) ListQtrees(ctx context.Context, volumePattern, name string) ([]Qtree, error) {
	svm, err := c.svm(ctx)
	if err != nil {
		return nil, err
	}
	q := url.Values{"svm.uuid": {svm}, "fields": {qtreeFields}}
	if volumePattern != "" {
		q.Set("volume.name", volumePattern)
	}
	if name != "" {
		q.Set("name", name)
	} else {
		q.Set("id", "!0")
	}
	recs, err := list[qtreeWire](ctx, c, qtreesEndpoint, qtreesEndpoint, q)
	if err != nil {
		return nil, err
	}
	out := make([]Qtree, 0, len(recs))
	for i := range recs {
		if recs[i].ID != 0 && recs[i].Name != "" {
			out = append(out, recs[i].qtree())
		}
	}
	return out, nil
}

// CountQtrees counts the explicit qtrees of a volume, in one request that
// returns no records.
func (c *Client) CountQtrees(ctx context.Context, volumeUUID string) (int, error) {
	svm, err := c.svm(ctx)
	if err != nil {
		return 0, err
	}
	var out struct {
		NumRecords int `json:"num_records"`
	}
	q := url.Values{"svm.uuid": {svm}, "volume.uuid": {volumeUUID}, "id": {"!0"}, "return_records": {"false"}}
	if err := c.get(ctx, qtreesEndpoint, qtreesEndpoint, q, &out); err != nil {
		return 0, err
	}
	return out.NumRecords, nil
}

func qtreePath(volumeUUID string, id int, endpoint string) (string, error) {
	p, err := instancePath(qtreesEndpoint+"/", volumeUUID, endpoint)
	if err != nil {
		return "", err
	}
	return p + "/" + strconv.Itoa(id), nil
}

// ModifyQtree renames a qtree or changes its export policy (a job).
func (c *Client) ModifyQtree(ctx context.Context, volumeUUID string, id int, m QtreeModify) error {
	const endpoint = qtreesEndpoint + "/{volume.uuid}/{id}"
	path, err := qtreePath(volumeUUID, id, "PATCH "+endpoint)
	if err != nil {
		return err
	}
	body := map[string]any{}
	if m.Name != nil {
		body["name"] = *m.Name
	}
	if m.ExportPolicy != nil {
		body["export_policy"] = nameRef{Name: *m.ExportPolicy}
	}
	if len(body) == 0 {
		return &Error{Class: ClassInvalid, Endpoint: "PATCH " + endpoint, Message: "nothing to modify"}
	}
	_, err = wasAmbiguous(c.mutate(ctx, http.MethodPatch, endpoint, path, nil, body, nil))
	return err
}

// DeleteQtree deletes a qtree with its data and its quota rules (a job).
// One that is gone already is ClassNotFound.
func (c *Client) DeleteQtree(ctx context.Context, volumeUUID string, id int) error {
	const endpoint = qtreesEndpoint + "/{volume.uuid}/{id}"
	if id <= 0 {
		return &Error{Class: ClassInvalid, Endpoint: "DELETE " + endpoint, Message: fmt.Sprintf("qtree id %d is not an explicit qtree", id)}
	}
	path, err := qtreePath(volumeUUID, id, "DELETE "+endpoint)
	if err != nil {
		return err
	}
	return resolveDelete(c.mutate(ctx, http.MethodDelete, endpoint, path, nil, nil, nil))
}
