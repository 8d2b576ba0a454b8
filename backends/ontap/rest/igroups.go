package rest

import (
	"context"
	"net/http"
	"net/url"
)

// Igroup is an iSCSI initiator group.
type Igroup struct {
	UUID       string
	Name       string
	OSType     string
	Protocol   string
	Initiators []string // IQNs
}

type igroupWire struct {
	UUID       string    `json:"uuid"`
	Name       string    `json:"name"`
	OSType     string    `json:"os_type"`
	Protocol   string    `json:"protocol"`
	Initiators []nameRef `json:"initiators"`
}

func (w *igroupWire) igroup() Igroup {
	ig := Igroup{UUID: w.UUID, Name: w.Name, OSType: w.OSType, Protocol: w.Protocol}
	for _, i := range w.Initiators {
		ig.Initiators = append(ig.Initiators, i.Name)
	}
	return ig
}

const igroupsEndpoint = "/protocols/san/igroups"

// CreateIgroup creates an iSCSI igroup of OS type linux holding initiators
// (IQNs) and returns it. ClassAlreadyExists if the name is taken.
func (c *Client) CreateIgroup(ctx context.Context, name string, initiators ...string) (*Igroup, error) {
	svm, err := c.svm(ctx)
	if err != nil {
		return nil, err
	}
	var out collection[igroupWire]
	body := map[string]any{"name": name, "protocol": "iscsi", "os_type": "linux", "svm": nameRef{UUID: svm}}
	if len(initiators) > 0 {
		inits := make([]nameRef, 0, len(initiators))
		for _, iqn := range initiators {
			inits = append(inits, nameRef{Name: iqn})
		}
		body["initiators"] = inits
	}
	err = c.mutate(ctx, http.MethodPost, igroupsEndpoint, igroupsEndpoint, url.Values{"return_records": {"true"}}, body, &out)
	if err = c.resolveCreate(ctx, err, func(ctx context.Context) error {
		_, err := c.GetIgroup(ctx, name)
		return err
	}); err != nil {
		return nil, err
	}
	if len(out.Records) == 1 && out.Records[0].UUID != "" {
		ig := out.Records[0].igroup()
		return &ig, nil
	}
	return c.GetIgroup(ctx, name)
}

// GetIgroup returns the igroup called name with its initiators; NotFound if
// there is none.
func (c *Client) GetIgroup(ctx context.Context, name string) (*Igroup, error) {
	svm, err := c.svm(ctx)
	if err != nil {
		return nil, err
	}
	q := url.Values{"svm.uuid": {svm}, "fields": {"uuid,name,os_type,protocol,initiators.name"}}
	if err := literalQuery(q, "name", name); err != nil {
		return nil, err
	}
	recs, err := list[igroupWire](ctx, c, igroupsEndpoint, igroupsEndpoint, q)
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, notFound(igroupsEndpoint, "igroup", name)
	}
	ig := recs[0].igroup()
	return &ig, nil
}

// DeleteIgroup deletes an igroup. ClassInUse while it is mapped to a LUN.
func (c *Client) DeleteIgroup(ctx context.Context, uuid string) error {
	const endpoint = igroupsEndpoint + "/{uuid}"
	path, err := instancePath(igroupsEndpoint+"/", uuid, "DELETE "+endpoint)
	if err != nil {
		return err
	}
	return resolveDelete(c.mutate(ctx, http.MethodDelete, endpoint, path, nil, nil, nil))
}

// AddInitiator adds an IQN to an igroup. ClassAlreadyExists if it is already
// a member.
func (c *Client) AddInitiator(ctx context.Context, igroupUUID, iqn string) error {
	const endpoint = igroupsEndpoint + "/{uuid}/initiators"
	base, err := instancePath(igroupsEndpoint+"/", igroupUUID, "POST "+endpoint)
	if err != nil {
		return err
	}
	err = c.mutate(ctx, http.MethodPost, endpoint, base+"/initiators", nil, map[string]string{"name": iqn}, nil)
	ambiguous, err := wasAmbiguous(err)
	if ambiguous && IsAlreadyExists(err) {
		return nil // our lost earlier attempt added it
	}
	return err
}

// removeInitiator removes an IQN from an igroup. ClassNotFound if it is not a
// member; ClassInUse while the igroup is mapped.
func (c *Client) removeInitiator(ctx context.Context, igroupUUID, iqn string) error {
	const endpoint = igroupsEndpoint + "/{uuid}/initiators/{name}"
	base, err := instancePath(igroupsEndpoint+"/", igroupUUID, "DELETE "+endpoint)
	if err != nil {
		return err
	}
	// ONTAP takes the IQN in the path with its colons as they are.
	path, err := instancePath(base+"/initiators/", iqn, "DELETE "+endpoint)
	if err != nil {
		return err
	}
	return resolveDelete(c.mutate(ctx, http.MethodDelete, endpoint, path, nil, nil, nil))
}
