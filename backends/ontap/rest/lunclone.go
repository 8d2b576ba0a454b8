package rest

import (
	"context"
	"net/http"
	"net/url"
)

// CloneLUN makes path a clone of the LUN at source, which must be in the
// same volume (ONTAP: 1260121): the clone shares the source's blocks and
// takes its size and OS type. A destination that exists is
// ClassAlreadyExists, unless an earlier attempt of this call made it.
func (c *Client) CloneLUN(ctx context.Context, source, path string) (*LUN, error) {
	svm, err := c.svm(ctx)
	if err != nil {
		return nil, err
	}
	body := map[string]any{
		"name": path, "svm": nameRef{UUID: svm},
		"clone": map[string]any{"source": nameRef{Name: source}},
	}
	err = c.mutate(ctx, http.MethodPost, lunsEndpoint, lunsEndpoint, url.Values{"return_records": {"true"}}, body, nil)
	if err = c.resolveCreate(ctx, err, func(ctx context.Context) error {
		_, err := c.GetLUN(ctx, path)
		return err
	}); err != nil {
		return nil, err
	}
	return c.GetLUN(ctx, path)
}

// DeleteLUN deletes a LUN that is not mapped (a mapped one is ClassInUse);
// one that is gone already is ClassNotFound.
func (c *Client) DeleteLUN(ctx context.Context, uuid string) error {
	return c.deleteLUN(ctx, uuid, false)
}

// IsLUNLimitReached reports that a volume already holds as many LUNs as
// ONTAP allows in one volume.
func IsLUNLimitReached(err error) bool { return hasCode(err, codeTooManyLUNs) }
