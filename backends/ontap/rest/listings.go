package rest

import (
	"context"
	"net/url"
)

// Whole-SVM listings, for answers about many objects at once (the
// controller's ListVolumes with published nodes): one request per kind,
// however many volumes ask (docs/design/ontap-rest.md §9).

// ExportPolicyRules is an export policy with its rules.
type ExportPolicyRules struct {
	ExportPolicy
	Rules []ExportRule
}

// ListExportPoliciesWithRules returns every export policy of the SVM with
// its rules, in one request (rules are fields of the policy record).
func (c *Client) ListExportPoliciesWithRules(ctx context.Context) ([]ExportPolicyRules, error) {
	svm, err := c.svm(ctx)
	if err != nil {
		return nil, err
	}
	type wire struct {
		exportPolicyWire
		Rules []exportRuleWire `json:"rules"`
	}
	recs, err := list[wire](ctx, c, exportPoliciesEndpoint, exportPoliciesEndpoint, url.Values{
		"svm.uuid": {svm},
		"fields":   {"id,name,rules.index,rules.clients,rules.protocols,rules.ro_rule,rules.rw_rule,rules.superuser"},
	})
	if err != nil {
		return nil, err
	}
	out := make([]ExportPolicyRules, 0, len(recs))
	for i := range recs {
		p := ExportPolicyRules{ExportPolicy: ExportPolicy{ID: recs[i].ID, Name: recs[i].Name}}
		for j := range recs[i].Rules {
			p.Rules = append(p.Rules, recs[i].Rules[j].rule())
		}
		out = append(out, p)
	}
	return out, nil
}

// ListIgroups returns every igroup of the SVM with its initiators, in one
// request.
func (c *Client) ListIgroups(ctx context.Context) ([]Igroup, error) {
	svm, err := c.svm(ctx)
	if err != nil {
		return nil, err
	}
	recs, err := list[igroupWire](ctx, c, igroupsEndpoint, igroupsEndpoint, url.Values{
		"svm.uuid": {svm}, "fields": {"uuid,name,os_type,protocol,initiators.name"},
	})
	if err != nil {
		return nil, err
	}
	out := make([]Igroup, 0, len(recs))
	for i := range recs {
		out = append(out, recs[i].igroup())
	}
	return out, nil
}
