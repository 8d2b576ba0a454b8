package rest

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
)

// ExportPolicy is an NFS export policy of the SVM.
type ExportPolicy struct {
	ID   int64
	Name string
}

// ExportRule is one rule of an export policy. AddExportRule fills empty
// Protocols with ["nfs"] and empty RORule, RWRule and Superuser with
// ["any"], as Trident does.
type ExportRule struct {
	Index     int64 // assigned by ONTAP
	Clients   []string
	Protocols []string
	RORule    []string
	RWRule    []string
	Superuser []string
}

type exportPolicyWire struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

type clientMatch struct {
	Match string `json:"match"`
}

type exportRuleWire struct {
	Index     int64         `json:"index,omitempty"`
	Clients   []clientMatch `json:"clients"`
	Protocols []string      `json:"protocols,omitempty"`
	RORule    []string      `json:"ro_rule,omitempty"`
	RWRule    []string      `json:"rw_rule,omitempty"`
	Superuser []string      `json:"superuser,omitempty"`
}

func (w *exportRuleWire) rule() ExportRule {
	r := ExportRule{Index: w.Index, Protocols: w.Protocols, RORule: w.RORule, RWRule: w.RWRule, Superuser: w.Superuser}
	for _, c := range w.Clients {
		r.Clients = append(r.Clients, c.Match)
	}
	return r
}

const exportPoliciesEndpoint = "/protocols/nfs/export-policies"

// CreateExportPolicy creates an export policy (synchronous) holding rules,
// in that one request (ONTAP takes the rules inline, docs/design/ontap-rest.md
// §3.7), and returns it with its ID. ClassAlreadyExists if the name is
// taken. Empty fields of the rules get AddExportRule's defaults.
func (c *Client) CreateExportPolicy(ctx context.Context, name string, rules ...ExportRule) (*ExportPolicy, error) {
	svm, err := c.svm(ctx)
	if err != nil {
		return nil, err
	}
	body := map[string]any{"name": name, "svm": nameRef{UUID: svm}}
	if len(rules) > 0 {
		ws := make([]exportRuleWire, 0, len(rules))
		for _, r := range rules {
			ws = append(ws, ruleWire(r))
		}
		body["rules"] = ws
	}
	var out collection[exportPolicyWire]
	err = c.mutate(ctx, http.MethodPost, exportPoliciesEndpoint, exportPoliciesEndpoint,
		url.Values{"return_records": {"true"}}, body, &out)
	if err = c.resolveCreate(ctx, err, func(ctx context.Context) error {
		_, err := c.GetExportPolicy(ctx, name)
		return err
	}); err != nil {
		return nil, err
	}
	if len(out.Records) == 1 && out.Records[0].ID != 0 {
		return &ExportPolicy{ID: out.Records[0].ID, Name: name}, nil
	}
	return c.GetExportPolicy(ctx, name)
}

// GetExportPolicy returns the SVM's export policy called name; NotFound if
// there is none.
func (c *Client) GetExportPolicy(ctx context.Context, name string) (*ExportPolicy, error) {
	svm, err := c.svm(ctx)
	if err != nil {
		return nil, err
	}
	q := url.Values{"svm.uuid": {svm}, "fields": {"id,name"}}
	if err := literalQuery(q, "name", name); err != nil {
		return nil, err
	}
	recs, err := list[exportPolicyWire](ctx, c, exportPoliciesEndpoint, exportPoliciesEndpoint, q)
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, notFound(exportPoliciesEndpoint, "export policy", name)
	}
	return &ExportPolicy{ID: recs[0].ID, Name: recs[0].Name}, nil
}

// GetExportPolicyRules returns the SVM's export policy called name with
// its rules, in one request; NotFound if there is none.
func (c *Client) GetExportPolicyRules(ctx context.Context, name string) (*ExportPolicy, []ExportRule, error) {
	svm, err := c.svm(ctx)
	if err != nil {
		return nil, nil, err
	}
	q := url.Values{"svm.uuid": {svm}, "fields": {"id,name,rules.index,rules.clients,rules.protocols,rules.ro_rule,rules.rw_rule,rules.superuser"}}
	if err := literalQuery(q, "name", name); err != nil {
		return nil, nil, err
	}
	type wire struct {
		exportPolicyWire
		Rules []exportRuleWire `json:"rules"`
	}
	recs, err := list[wire](ctx, c, exportPoliciesEndpoint, exportPoliciesEndpoint, q)
	if err != nil {
		return nil, nil, err
	}
	if len(recs) == 0 {
		return nil, nil, notFound(exportPoliciesEndpoint, "export policy", name)
	}
	rules := make([]ExportRule, 0, len(recs[0].Rules))
	for i := range recs[0].Rules {
		rules = append(rules, recs[0].Rules[i].rule())
	}
	return &ExportPolicy{ID: recs[0].ID, Name: recs[0].Name}, rules, nil
}

// DeleteExportPolicy deletes a policy. ClassInUse while a volume uses it or for
// the "default" policy.
func (c *Client) DeleteExportPolicy(ctx context.Context, id int64) error {
	const endpoint = exportPoliciesEndpoint + "/{id}"
	path := exportPoliciesEndpoint + "/" + strconv.FormatInt(id, 10)
	return resolveDelete(c.mutate(ctx, http.MethodDelete, endpoint, path, nil, nil, nil))
}

func rulesPath(policyID int64) string {
	return exportPoliciesEndpoint + "/" + strconv.FormatInt(policyID, 10) + "/rules"
}

// ListExportRules returns the rules of a policy.
func (c *Client) ListExportRules(ctx context.Context, policyID int64) ([]ExportRule, error) {
	const endpoint = exportPoliciesEndpoint + "/{id}/rules"
	recs, err := list[exportRuleWire](ctx, c, endpoint, rulesPath(policyID), url.Values{
		"fields": {"index,clients,protocols,ro_rule,rw_rule,superuser"},
	})
	if err != nil {
		return nil, err
	}
	rules := make([]ExportRule, 0, len(recs))
	for i := range recs {
		rules = append(rules, recs[i].rule())
	}
	return rules, nil
}

// AddExportRule appends a rule to a policy and returns it with the index
// ONTAP assigned. ClassAlreadyExists if an identical rule exists.
func (c *Client) AddExportRule(ctx context.Context, policyID int64, rule ExportRule) (*ExportRule, error) {
	const endpoint = exportPoliciesEndpoint + "/{id}/rules"
	w := ruleWire(rule)
	var out collection[exportRuleWire]
	err := c.mutate(ctx, http.MethodPost, endpoint, rulesPath(policyID), url.Values{"return_records": {"true"}}, w, &out)
	ambiguous, err := wasAmbiguous(err)
	if err == nil && len(out.Records) == 1 && out.Records[0].Index != 0 {
		r := out.Records[0].rule()
		if len(r.Clients) == 0 {
			r = w.rule()
			r.Index = out.Records[0].Index
		}
		return &r, nil
	}
	if err != nil && !(ambiguous && IsAlreadyExists(err)) {
		return nil, err
	}
	// ONTAP did not echo the index, or an earlier attempt of this call made
	// the rule: find it by its clients.
	rules, lerr := c.ListExportRules(ctx, policyID)
	if lerr != nil {
		return nil, lerr
	}
	for i := range rules {
		if sameSet(rules[i].Clients, rule.Clients) {
			return &rules[i], nil
		}
	}
	if err != nil {
		return nil, err
	}
	return nil, &Error{Class: ClassUnknown, Endpoint: "POST " + endpoint, Message: "created rule not found"}
}

// DeleteExportRule removes the rule with the given index.
func (c *Client) DeleteExportRule(ctx context.Context, policyID, index int64) error {
	const endpoint = exportPoliciesEndpoint + "/{id}/rules/{index}"
	path := rulesPath(policyID) + "/" + strconv.FormatInt(index, 10)
	return resolveDelete(c.mutate(ctx, http.MethodDelete, endpoint, path, nil, nil, nil))
}

// ruleWire is a rule as ONTAP takes it, with Trident's defaults filled in.
func ruleWire(rule ExportRule) exportRuleWire {
	w := exportRuleWire{
		Protocols: orDefault(rule.Protocols, "nfs"),
		RORule:    orDefault(rule.RORule, "any"),
		RWRule:    orDefault(rule.RWRule, "any"),
		Superuser: orDefault(rule.Superuser, "any"),
	}
	for _, m := range rule.Clients {
		w.Clients = append(w.Clients, clientMatch{Match: m})
	}
	return w
}

func orDefault(v []string, def string) []string {
	if len(v) == 0 {
		return []string{def}
	}
	return v
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
