package rest

import (
	"context"
	"net/http"
	"net/url"
)

// ConsistencyGroup is an ONTAP consistency group (ONTAP 9.10.1+,
// docs/design/ontap-rest.md §3.13).
type ConsistencyGroup struct {
	UUID    string
	Name    string
	Volumes []string // names
}

const cgsEndpoint = "/application/consistency-groups"

type cgWire struct {
	UUID    string    `json:"uuid"`
	Name    string    `json:"name"`
	Volumes []nameRef `json:"volumes"`
}

// CreateConsistencyGroup groups existing volumes (an asynchronous job).
// An earlier attempt's group, whose answer got lost, counts as success.
func (c *Client) CreateConsistencyGroup(ctx context.Context, name string, volumes []string) error {
	svm, err := c.svm(ctx)
	if err != nil {
		return err
	}
	vols := make([]map[string]any, 0, len(volumes))
	for _, v := range volumes {
		vols = append(vols, map[string]any{"name": v, "provisioning_options": map[string]string{"action": "add"}})
	}
	body := map[string]any{"name": name, "svm": nameRef{UUID: svm}, "volumes": vols}
	err = c.mutate(ctx, http.MethodPost, cgsEndpoint, cgsEndpoint, nil, body, nil)
	return c.resolveCreate(ctx, err, func(ctx context.Context) error {
		_, err := c.GetConsistencyGroup(ctx, name)
		return err
	})
}

// GetConsistencyGroup returns the SVM's group called name; NotFound if
// there is none.
func (c *Client) GetConsistencyGroup(ctx context.Context, name string) (*ConsistencyGroup, error) {
	svm, err := c.svm(ctx)
	if err != nil {
		return nil, err
	}
	q := url.Values{"svm.uuid": {svm}, "fields": {"uuid,name,volumes.name"}}
	if err := literalQuery(q, "name", name); err != nil {
		return nil, err
	}
	recs, err := list[cgWire](ctx, c, cgsEndpoint, cgsEndpoint, q)
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, notFound(cgsEndpoint, "consistency group", name)
	}
	g := &ConsistencyGroup{UUID: recs[0].UUID, Name: recs[0].Name}
	for _, v := range recs[0].Volumes {
		g.Volumes = append(g.Volumes, v.Name)
	}
	return g, nil
}

// SnapshotConsistencyGroup takes a snapshot called name of every member
// of the group at one instant (an asynchronous job); each member's is an
// ordinary volume snapshot.
func (c *Client) SnapshotConsistencyGroup(ctx context.Context, uuid, name string) error {
	const endpoint = cgsEndpoint + "/{uuid}/snapshots"
	path, err := instancePath(cgsEndpoint+"/", uuid, "POST "+endpoint)
	if err != nil {
		return err
	}
	_, err = wasAmbiguous(c.mutate(ctx, http.MethodPost, endpoint, path+"/snapshots", nil, map[string]any{"name": name}, nil))
	return err
}

// DeleteConsistencyGroup deletes the group, not its volumes or snapshots.
func (c *Client) DeleteConsistencyGroup(ctx context.Context, uuid string) error {
	const endpoint = cgsEndpoint + "/{uuid}"
	path, err := instancePath(cgsEndpoint+"/", uuid, "DELETE "+endpoint)
	if err != nil {
		return err
	}
	return resolveDelete(c.mutate(ctx, http.MethodDelete, endpoint, path, nil, nil, nil))
}
