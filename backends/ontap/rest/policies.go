package rest

import (
	"context"
	"net/http"
	"net/url"
)

// QoSPolicy is a QoS policy group (docs/design/ontap-rest.md §3.12).
type QoSPolicy struct {
	UUID     string
	Name     string
	Adaptive bool // an adaptive policy group; otherwise a fixed one
}

// policyWire is a QoS or snapshot policy record: both belong to an SVM or
// to the cluster.
type policyWire struct {
	UUID     string         `json:"uuid"`
	Name     string         `json:"name"`
	Adaptive map[string]any `json:"adaptive"`
	Scope    string         `json:"scope"`
	SVM      nameRef        `json:"svm"`
}

// usablePolicy returns the policy called name at endpoint that the SVM
// can use: its own, or one of the cluster's. NotFound if there is none.
func (c *Client) usablePolicy(ctx context.Context, endpoint, fields, what, name string) (*policyWire, error) {
	svm, err := c.svm(ctx)
	if err != nil {
		return nil, err
	}
	q := url.Values{"fields": {fields}}
	if err := literalQuery(q, "name", name); err != nil {
		return nil, err
	}
	recs, err := list[policyWire](ctx, c, endpoint, endpoint, q)
	if err != nil && !IsNotFound(err) {
		return nil, err
	}
	for i := range recs {
		if r := &recs[i]; r.Scope == "cluster" || r.SVM.UUID == "" || r.SVM.UUID == svm {
			return r, nil
		}
	}
	return nil, notFound(endpoint, what, name)
}

// GetQoSPolicy returns the QoS policy group called name that the SVM can
// use: its own, or one of the cluster's (the built-in adaptive groups).
// NotFound if there is none.
func (c *Client) GetQoSPolicy(ctx context.Context, name string) (*QoSPolicy, error) {
	r, err := c.usablePolicy(ctx, "/storage/qos/policies", "uuid,name,adaptive,scope,svm.uuid", "QoS policy group", name)
	if err != nil {
		return nil, err
	}
	return &QoSPolicy{UUID: r.UUID, Name: r.Name, Adaptive: r.Adaptive != nil}, nil
}

// SnapshotPolicyExists reports whether the SVM can use the snapshot
// policy called name: its own, or one of the cluster's.
func (c *Client) SnapshotPolicyExists(ctx context.Context, name string) (bool, error) {
	_, err := c.usablePolicy(ctx, "/storage/snapshot-policies", "name,scope,svm.uuid", "snapshot policy", name)
	if IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// SetLUNQoSPolicy puts a LUN in a QoS policy group; "none" takes it out
// (PATCH /storage/luns/{uuid}, synchronous).
func (c *Client) SetLUNQoSPolicy(ctx context.Context, uuid, policy string) error {
	const endpoint = lunsEndpoint + "/{uuid}"
	path, err := instancePath(lunsEndpoint+"/", uuid, "PATCH "+endpoint)
	if err != nil {
		return err
	}
	_, err = wasAmbiguous(c.mutate(ctx, http.MethodPatch, endpoint, path, nil,
		map[string]any{"qos_policy": nameRef{Name: policy}}, nil))
	return err
}
