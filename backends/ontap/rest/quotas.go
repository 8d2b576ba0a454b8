package rest

import (
	"context"
	"net/http"
	"net/url"
)

// QuotaRule is a tree quota rule (docs/design/economy.md §2). Qtree "" is
// the volume's default tree rule. HardLimit is bytes, -1 for none.
type QuotaRule struct {
	UUID       string
	Volume     string
	VolumeUUID string
	Qtree      string
	HardLimit  int64
}

const (
	quotaRulesEndpoint = "/storage/quota/rules"
	quotaRuleFields    = "uuid,volume.name,volume.uuid,qtree.name,space.hard_limit"
)

type quotaRuleWire struct {
	UUID   string  `json:"uuid"`
	Volume nameRef `json:"volume"`
	Qtree  struct {
		Name string `json:"name"`
	} `json:"qtree"`
	Space struct {
		HardLimit *int64 `json:"hard_limit"`
	} `json:"space"`
}

func (w *quotaRuleWire) rule() QuotaRule {
	r := QuotaRule{UUID: w.UUID, Volume: w.Volume.Name, VolumeUUID: w.Volume.UUID, Qtree: w.Qtree.Name, HardLimit: -1}
	if w.Space.HardLimit != nil {
		r.HardLimit = *w.Space.HardLimit
	}
	return r
}

// CreateQuotaRule creates a tree rule limiting qtree (the default rule for
// "") of volume to hardLimit bytes (-1: none). With quotas on, ONTAP
// applies it at once when the qtree already had a derived quota; otherwise
// the rule is saved but not in force, which IsQuotaNotInForce reports. An
// existing rule for the target is ClassAlreadyExists.
func (c *Client) CreateQuotaRule(ctx context.Context, volume, qtree string, hardLimit int64) error {
	svm, err := c.svm(ctx)
	if err != nil {
		return err
	}
	body := map[string]any{
		"svm": nameRef{UUID: svm}, "volume": nameRef{Name: volume}, "type": "tree",
		"qtree": map[string]string{"name": qtree}, "space": map[string]int64{"hard_limit": hardLimit},
	}
	err = c.mutate(ctx, http.MethodPost, quotaRulesEndpoint, quotaRulesEndpoint, nil, body, nil)
	return c.resolveCreate(ctx, err, func(ctx context.Context) error {
		vol, err := Literal(volume)
		if err != nil {
			return err
		}
		rules, err := c.ListQuotaRules(ctx, vol, qtree)
		if err == nil && len(rules) == 0 {
			err = notFound(quotaRulesEndpoint, "quota rule", volume+"/"+qtree)
		}
		return err
	})
}

// ListQuotaRules lists the tree rules of the volumes matching
// volumePattern (ONTAP query syntax), only those of qtree when it is set.
// The default rules are included unless qtree is set.
func (c *Client) ListQuotaRules(ctx context.Context, volumePattern, qtree string) ([]QuotaRule, error) {
	svm, err := c.svm(ctx)
	if err != nil {
		return nil, err
	}
	q := url.Values{"svm.uuid": {svm}}
	if volumePattern != "" {
		q.Set("volume.name", volumePattern)
	}
	if qtree != "" {
		if err := literalQuery(q, "qtree.name", qtree); err != nil {
			return nil, err
		}
	}
	return c.listQuotaRules(ctx, q)
}

// listQuotaRules lists the tree rules matching q.
func (c *Client) listQuotaRules(ctx context.Context, q url.Values) ([]QuotaRule, error) {
	q.Set("type", "tree")
	q.Set("fields", quotaRuleFields)
	recs, err := list[quotaRuleWire](ctx, c, quotaRulesEndpoint, quotaRulesEndpoint, q)
	if err != nil {
		return nil, err
	}
	out := make([]QuotaRule, 0, len(recs))
	for i := range recs {
		out = append(out, recs[i].rule())
	}
	return out, nil
}

// VolumeQuotaRules lists the tree rules of one volume, its default rule
// included.
func (c *Client) VolumeQuotaRules(ctx context.Context, volumeUUID string) ([]QuotaRule, error) {
	svm, err := c.svm(ctx)
	if err != nil {
		return nil, err
	}
	return c.listQuotaRules(ctx, url.Values{"svm.uuid": {svm}, "volume.uuid": {volumeUUID}})
}

// SetQuotaLimit changes a rule's hard limit. With quotas on, ONTAP resizes
// them at once; a resize that failed leaves the rule changed but not in
// force (IsQuotaNotInForce).
func (c *Client) SetQuotaLimit(ctx context.Context, uuid string, hardLimit int64) error {
	const endpoint = quotaRulesEndpoint + "/{uuid}"
	path, err := instancePath(quotaRulesEndpoint+"/", uuid, "PATCH "+endpoint)
	if err != nil {
		return err
	}
	_, err = wasAmbiguous(c.mutate(ctx, http.MethodPatch, endpoint, path, nil,
		map[string]any{"space": map[string]int64{"hard_limit": hardLimit}}, nil))
	return err
}

// SetVolumeQuota turns a volume's quotas on or off (a job). Turning them on
// initializes them: Volume.QuotaState reads "initializing" until ONTAP has
// scanned the volume, and nothing is enforced meanwhile.
func (c *Client) SetVolumeQuota(ctx context.Context, volumeUUID string, enabled bool) error {
	const endpoint = "/storage/volumes/{uuid}"
	path, err := instancePath("/storage/volumes/", volumeUUID, "PATCH "+endpoint)
	if err != nil {
		return err
	}
	_, err = wasAmbiguous(c.mutate(ctx, http.MethodPatch, endpoint, path, nil,
		map[string]any{"quota": map[string]bool{"enabled": enabled}}, nil))
	return err
}

// VolumeQuotaState is a volume's quota state: "off", "initializing", "on",
// "resizing", "corrupt", ...
func (c *Client) VolumeQuotaState(ctx context.Context, volumeUUID string) (string, error) {
	path, err := instancePath("/storage/volumes/", volumeUUID, "GET /storage/volumes/{uuid}")
	if err != nil {
		return "", err
	}
	var out struct {
		Quota struct {
			State string `json:"state"`
		} `json:"quota"`
	}
	if err := c.get(ctx, "/storage/volumes/{uuid}", path, url.Values{"fields": {"quota.state"}}, &out); err != nil {
		return "", err
	}
	return out.Quota.State, nil
}

// IsQuotaNotInForce reports that ONTAP saved or changed a quota rule but
// could not put it in force (the resize failed or was skipped): quotas
// must be turned off and on again for the volume.
func IsQuotaNotInForce(err error) bool {
	return hasCode(err, codeQuotaResizeFailedModify, codeQuotaResizeFailedCreate, codeQuotaResizeSkipped)
}
