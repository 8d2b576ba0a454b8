package ontapsim

import (
	"maps"
	"net"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

var policyResource = &resource{
	schema: newSchema(`id name svm.name svm.uuid rules.index rules.clients.match rules.protocols rules.ro_rule
		rules.rw_rule rules.superuser rules.anonymous_user rules.allow_suid rules.allow_device_creation
		rules.chown_mode rules.ntfs_unix_security _links`),
	keys:    []string{"id", "name"},
	sortKey: "id",
}

var ruleResource = &resource{
	schema: newSchema(`index clients.match protocols ro_rule rw_rule superuser anonymous_user allow_suid
		allow_device_creation chown_mode ntfs_unix_security policy.id policy.name svm.name svm.uuid _links`),
	keys:    []string{"index"},
	sortKey: "index",
}

var ruleFields = `clients.match protocols ro_rule rw_rule superuser anonymous_user allow_suid
	allow_device_creation chown_mode ntfs_unix_security`

var (
	policyPostFields  = newSchema(`name svm.name svm.uuid ` + prefixFields("rules.", ruleFields))
	policyPatchFields = newSchema(`name ` + prefixFields("rules.", ruleFields))
	rulePostFields    = newSchema(ruleFields)
	rulePatchFields   = newSchema(ruleFields)
)

func prefixFields(prefix, fields string) string {
	var out []string
	for _, f := range strings.Fields(fields) {
		out = append(out, prefix+f)
	}
	return strings.Join(out, " ")
}

var (
	authFlavors = []string{"any", "none", "never", "krb5", "krb5i", "krb5p", "ntlm", "sys"}
	protocols   = []string{"any", "nfs", "nfs3", "nfs4", "cifs", "flexcache"}
	hostnameRE  = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$`)
	numericRE   = regexp.MustCompile(`^[0-9.]+$`)
)

func validatePolicyName(name string) *apiError {
	switch {
	case name == "":
		return errInvalid(codeMissingRequired, "name", "Request missing required value \"name\".")
	case len(name) > 256:
		return errInvalid(codePolicyNameTooLong, "name", "Export policy name %q is too long. The maximum length is 256 characters.", name)
	case strings.IndexFunc(name, unicode.IsSpace) >= 0 || strings.ContainsAny(name, ",/\\"):
		return errInvalid(codePolicyNameInvalid, "name", "Invalid export policy name %q: it must not contain spaces.", name)
	}
	return nil
}

// clientMatch is one element of a comma-separated clients.match.
type clientMatch struct {
	ip  net.IP
	net *net.IPNet
}

// parseClientMatch validates a clientmatch and returns the IP forms
// (hostnames, @netgroups and .domains are valid but match no address: the
// simulator has no name service).
func parseClientMatch(s string) ([]clientMatch, *apiError) {
	var out []clientMatch
	seen := map[string]bool{}
	for _, raw := range strings.Split(s, ",") {
		e := strings.TrimSpace(raw)
		if seen[strings.ToLower(e)] {
			return nil, errInvalid(codeClientMatchDup, "clients.match", "Duplicate entry %q in the clientmatch list %q.", e, s)
		}
		seen[strings.ToLower(e)] = true
		switch {
		case e == "":
			return nil, errInvalid(codeClientMatchInvalid, "clients.match", "Invalid clientmatch %q: empty entry.", s)
		case strings.Contains(e, "/"):
			addr, mask, _ := strings.Cut(e, "/")
			if m := net.ParseIP(mask); m != nil && m.To4() != nil && net.ParseIP(addr).To4() != nil {
				ipm := net.IPMask(m.To4())
				if ones, bits := ipm.Size(); bits == 0 || ones == 0 && !m.Equal(net.IPv4zero) {
					return nil, errInvalid(codeClientMatchInvalid, "clients.match", "Invalid netmask in clientmatch %q.", e)
				}
				out = append(out, clientMatch{net: &net.IPNet{IP: net.ParseIP(addr).Mask(ipm), Mask: ipm}})
				continue
			}
			_, n, err := net.ParseCIDR(e)
			if err != nil {
				return nil, errInvalid(codeClientMatchInvalid, "clients.match", "Invalid clientmatch %q: not an address/prefix.", e)
			}
			out = append(out, clientMatch{net: n})
		case net.ParseIP(e) != nil:
			out = append(out, clientMatch{ip: net.ParseIP(e)})
		case strings.HasPrefix(e, "@"):
			if len(e) == 1 {
				return nil, errInvalid(codeClientMatchInvalid, "clients.match", "Invalid netgroup %q.", e)
			}
		case strings.HasPrefix(e, "."):
			if !hostnameRE.MatchString(e[1:]) {
				return nil, errInvalid(codeClientMatchInvalid, "clients.match", "Invalid domain %q.", e)
			}
		case numericRE.MatchString(e) || !hostnameRE.MatchString(e):
			return nil, errInvalid(codeClientMatchInvalid, "clients.match", "Invalid clientmatch %q.", e)
		}
	}
	return out, nil
}

func matchesClient(clients []string, ip net.IP) bool {
	for _, c := range clients {
		ms, err := parseClientMatch(c)
		if err != nil {
			continue
		}
		for _, m := range ms {
			if (m.ip != nil && m.ip.Equal(ip)) || (m.net != nil && m.net.Contains(ip)) {
				return true
			}
		}
	}
	return false
}

// flavorAllows evaluates an ro_rule/rw_rule list for an AUTH_SYS client:
// "never" denies; "any", "sys" and "none" (access as anonymous) allow.
func flavorAllows(rule []string) bool {
	allow := false
	for _, f := range rule {
		switch f {
		case "never":
			return false
		case "any", "sys", "none":
			allow = true
		}
	}
	return allow
}

// policyAccess evaluates p for an NFS client at ip: the first rule (by
// index) matching the client and NFS decides. ONTAP grants write access only
// together with read access.
func policyAccess(p *policyState, ip net.IP) (ro, rw bool) {
	rules := append([]*ruleState(nil), p.Rules...)
	sort.Slice(rules, func(i, j int) bool { return rules[i].Index < rules[j].Index })
	for _, r := range rules {
		if !matchesClient(r.Clients, ip) {
			continue
		}
		nfs := false
		for _, pr := range r.Protocols {
			if pr == "any" || strings.HasPrefix(pr, "nfs") {
				nfs = true
			}
		}
		if !nfs {
			continue
		}
		ro = flavorAllows(r.RORule)
		return ro, ro && flavorAllows(r.RWRule)
	}
	return false, false
}

// parseRule reads a rule body (POST or inline in a policy). base holds the
// defaults (POST) or the current values (PATCH).
func parseRule(b *bodyReader, base *ruleState, requireClients bool) (*ruleState, *apiError) {
	r := *base
	if cl, ok := b.objects("clients"); ok {
		r.Clients = nil
		for _, c := range cl {
			m, _ := c.str("match")
			b.sub(c)
			if b.err != nil {
				return nil, b.err
			}
			if _, err := parseClientMatch(m); err != nil {
				return nil, err
			}
			r.Clients = append(r.Clients, m)
		}
	}
	if b.err != nil {
		return nil, b.err
	}
	if requireClients && len(r.Clients) == 0 {
		return nil, errInvalid(codeMissingRequired, "clients", "Request missing required value \"clients\".")
	}
	enumList := func(field string, allowed []string, dst *[]string) {
		list, ok := b.strList(field)
		if !ok {
			return
		}
		var out []string
		for _, v := range list {
			l := strings.ToLower(v)
			if !contains(allowed, l) {
				b.fail(field, v, "one of "+strings.Join(allowed, ", "))
				return
			}
			out = append(out, l)
		}
		*dst = out
	}
	enumList("protocols", protocols, &r.Protocols)
	enumList("ro_rule", authFlavors, &r.RORule)
	enumList("rw_rule", authFlavors, &r.RWRule)
	enumList("superuser", authFlavors, &r.Superuser)
	if v, ok := b.lookup("anonymous_user"); ok {
		s := scalarString(v)
		if s == "" {
			b.fail("anonymous_user", v, "must not be empty")
		}
		r.AnonymousUser = s
	}
	if v, ok := b.boolean("allow_suid"); ok {
		r.AllowSUID = v
	}
	if v, ok := b.boolean("allow_device_creation"); ok {
		r.AllowDeviceCreation = v
	}
	if v, ok := b.enum("chown_mode", "restricted", "unrestricted"); ok {
		r.ChownMode = v
	}
	if v, ok := b.enum("ntfs_unix_security", "fail", "ignore"); ok {
		r.NTFSUnixSecurity = v
	}
	if b.err != nil {
		return nil, b.err
	}
	return &r, nil
}

func sameRule(a, b *ruleState) bool {
	eq := func(x, y []string) bool { return strings.Join(x, ",") == strings.Join(y, ",") }
	return eq(a.Clients, b.Clients) && eq(a.Protocols, b.Protocols) && eq(a.RORule, b.RORule) &&
		eq(a.RWRule, b.RWRule) && eq(a.Superuser, b.Superuser) && a.AnonymousUser == b.AnonymousUser &&
		a.AllowSUID == b.AllowSUID && a.AllowDeviceCreation == b.AllowDeviceCreation &&
		a.ChownMode == b.ChownMode && a.NTFSUnixSecurity == b.NTFSUnixSecurity
}

func (s *Simulator) renderRule(p *policyState, r *ruleState) map[string]any {
	var clients []any
	for _, c := range r.Clients {
		clients = append(clients, map[string]any{"match": c})
	}
	rec := map[string]any{
		"index": r.Index, "clients": clients, "protocols": stringsAny(r.Protocols),
		"ro_rule": stringsAny(r.RORule), "rw_rule": stringsAny(r.RWRule), "superuser": stringsAny(r.Superuser),
		"anonymous_user": r.AnonymousUser, "allow_suid": r.AllowSUID, "allow_device_creation": r.AllowDeviceCreation,
		"chown_mode": r.ChownMode, "ntfs_unix_security": r.NTFSUnixSecurity,
		"policy": map[string]any{"id": p.ID, "name": p.Name},
		"_links": selfLink("/api/protocols/nfs/export-policies/" + itoa64(p.ID) + "/rules/" + itoa64(r.Index)),
	}
	if svm := s.m.svm(p.SVM); svm != nil {
		rec["svm"] = map[string]any{"name": svm.Name, "uuid": svm.UUID}
	}
	return rec
}

func (s *Simulator) renderPolicy(p *policyState) map[string]any {
	rules := []any{}
	for _, r := range sortedRules(p) {
		rr := s.renderRule(p, r)
		delete(rr, "policy")
		delete(rr, "svm")
		delete(rr, "_links")
		rules = append(rules, rr)
	}
	rec := map[string]any{"id": p.ID, "name": p.Name, "rules": rules,
		"_links": selfLink("/api/protocols/nfs/export-policies/" + itoa64(p.ID))}
	if svm := s.m.svm(p.SVM); svm != nil {
		rec["svm"] = map[string]any{"name": svm.Name, "uuid": svm.UUID}
	}
	return rec
}

func sortedRules(p *policyState) []*ruleState {
	rules := append([]*ruleState(nil), p.Rules...)
	sort.Slice(rules, func(i, j int) bool { return rules[i].Index < rules[j].Index })
	return rules
}

func (s *Simulator) getPolicies(c *call) (*reply, *apiError) {
	policies := slices.Collect(maps.Values(s.m.ExportPolicies))
	keys := map[string]any{}
	return c.listByKeys(policyResource, len(policies), func(i int) map[string]any {
		// Every policy has its own name and ID; the SVM is left to the
		// rendered record.
		keys["id"], keys["name"] = policies[i].ID, policies[i].Name
		return keys
	}, func(i int) map[string]any { return s.renderPolicy(policies[i]) })
}

// policy resolves the {id} (or {policy.id}) path parameter; notFound is the
// error for a missing policy on that endpoint.
func (c *call) policy(param string, notFound *apiError) (*policyState, *apiError) {
	id, err := strconv.ParseInt(c.params[param], 10, 64)
	if err != nil {
		return nil, notFound
	}
	p := c.m.ExportPolicies[id]
	if p == nil {
		return nil, notFound
	}
	return p, nil
}

func (s *Simulator) getPolicy(c *call) (*reply, *apiError) {
	p, err := c.policy("id", errNotFound(codeNotFound, "id", "entry doesn't exist"))
	if err != nil {
		return nil, err
	}
	return c.instance(policyResource, s.renderPolicy(p))
}

func (s *Simulator) postPolicy(c *call) (*reply, *apiError) {
	b := c.body
	if err := c.checkBody(policyPostFields, policyResource); err != nil {
		return nil, err
	}
	svm, err := c.resolveSVM(b, true)
	if err != nil {
		return nil, err
	}
	name, _ := b.str("name")
	if b.err != nil {
		return nil, b.err
	}
	if err := validatePolicyName(name); err != nil {
		return nil, err
	}
	rules, err := parseInlineRules(b)
	if err != nil {
		return nil, err
	}
	if s.m.policyByName(svm.UUID, name) != nil {
		return nil, errConflict(codeDuplicate, "name", "Duplicate entry: export policy %q already exists in SVM %q.", name, svm.Name)
	}
	svm.PolicySeq++
	p := &policyState{ID: int64(svm.Index)<<32 + svm.PolicySeq, Name: name, SVM: svm.UUID, Rules: rules}
	s.m.ExportPolicies[p.ID] = p
	return c.created(s.renderPolicy(p), "/api/protocols/nfs/export-policies/"+itoa64(p.ID)), nil
}

func parseInlineRules(b *bodyReader) ([]*ruleState, *apiError) {
	items, ok := b.objects("rules")
	if b.err != nil {
		return nil, b.err
	}
	var rules []*ruleState
	if !ok {
		return rules, nil
	}
	for i, item := range items {
		r, err := parseRule(item, newRule(int64(i+1), nil), true)
		if err != nil {
			return nil, err
		}
		for _, other := range rules {
			if sameRule(other, r) {
				return nil, errInvalid(1704071, "rules", "Duplicate rules in the request.")
			}
		}
		rules = append(rules, r)
	}
	return rules, nil
}

func (s *Simulator) patchPolicy(c *call) (*reply, *apiError) {
	p, err := c.policy("id", errNotFound(codeNotFound, "id", "entry doesn't exist"))
	if err != nil {
		return nil, err
	}
	if err := c.patchBody(policyPatchFields, policyResource); err != nil {
		return nil, err
	}
	b := c.body
	name, hasName := b.str("name")
	if b.err != nil {
		return nil, b.err
	}
	if hasName {
		if err := validatePolicyName(name); err != nil {
			return nil, err
		}
		if p.IsDefault && name != p.Name {
			return nil, errConflict(codePolicyIsDefault, "name", "The default export policy cannot be renamed.")
		}
		if other := s.m.policyByName(p.SVM, name); other != nil && other != p {
			return nil, errConflict(codeDuplicate, "name", "Duplicate entry: export policy %q already exists.", name)
		}
	}
	var rules []*ruleState
	if b.has("rules") {
		if rules, err = parseInlineRules(b); err != nil {
			return nil, err
		}
	}
	if hasName {
		p.Name = name
	}
	if b.has("rules") {
		p.Rules = rules
	}
	return okReply(), nil
}

func (s *Simulator) deletePolicy(c *call) (*reply, *apiError) {
	p, err := c.policy("id", errNotFound(codeNotFound, "id", "entry doesn't exist"))
	if err != nil {
		return nil, err
	}
	if p.IsDefault {
		return nil, errConflict(codePolicyIsDefault, "id", "Cannot delete the default export policy.")
	}
	for _, v := range s.m.Volumes {
		if v.ExportPolicy == p.ID {
			return nil, errConflict(codePolicyInUse, "id", "Ruleset %q is in use by volume %q and cannot be deleted.", p.Name, v.Name)
		}
	}
	if q := s.m.policyUsedByQtree(p); q != nil {
		return nil, errConflict(codePolicyUsedByQtree, "id", "Ruleset %q is in use by qtree %q and cannot be deleted.", p.Name, q.Name)
	}
	delete(s.m.ExportPolicies, p.ID)
	return okReply(), nil
}

// ---- rules ----

func policyMissing(c *call) *apiError {
	return errNotFound(codePolicyNotFound, "policy.id", "Export policy %q does not exist.", c.params["policy.id"])
}

func (c *call) rule(p *policyState) (*ruleState, *apiError) {
	idx, err := strconv.ParseInt(c.params["index"], 10, 64)
	if err == nil {
		for _, r := range p.Rules {
			if r.Index == idx {
				return r, nil
			}
		}
	}
	return nil, errNotFound(codeNotFound, "index", "entry doesn't exist")
}

func (s *Simulator) getRules(c *call) (*reply, *apiError) {
	p, err := c.policy("policy.id", policyMissing(c))
	if err != nil {
		return nil, err
	}
	var recs []map[string]any
	for _, r := range p.Rules {
		recs = append(recs, s.renderRule(p, r))
	}
	return c.list(ruleResource, recs)
}

func (s *Simulator) getRule(c *call) (*reply, *apiError) {
	p, err := c.policy("policy.id", policyMissing(c))
	if err != nil {
		return nil, err
	}
	r, err := c.rule(p)
	if err != nil {
		return nil, err
	}
	return c.instance(ruleResource, s.renderRule(p, r))
}

func (s *Simulator) postRule(c *call) (*reply, *apiError) {
	p, err := c.policy("policy.id", policyMissing(c))
	if err != nil {
		return nil, err
	}
	if err := c.checkBody(rulePostFields, ruleResource); err != nil {
		return nil, err
	}
	var maxIdx int64
	for _, r := range p.Rules {
		maxIdx = max(maxIdx, r.Index)
	}
	if maxIdx >= 4294967295 {
		return nil, errInvalid(codeRuleIndexMax, "index", "Export rule index 4294967295 is in use; no further rule index is available.")
	}
	r, err := parseRule(c.body, newRule(maxIdx+1, nil), true)
	if err != nil {
		return nil, err
	}
	for _, other := range p.Rules {
		probe := *r
		probe.Index = other.Index
		if sameRule(other, &probe) {
			return nil, errConflict(codeRuleDuplicate, "", "Export policy rule already exists in policy %q with the same values (index %d).", p.Name, other.Index)
		}
	}
	p.Rules = append(p.Rules, r)
	return c.created(s.renderRule(p, r), "/api/protocols/nfs/export-policies/"+itoa64(p.ID)+"/rules/"+itoa64(r.Index)), nil
}

func (s *Simulator) patchRule(c *call) (*reply, *apiError) {
	p, err := c.policy("policy.id", policyMissing(c))
	if err != nil {
		return nil, err
	}
	r, err := c.rule(p)
	if err != nil {
		return nil, err
	}
	newIndex := int64(0)
	if v := c.q.Get("new_index"); v != "" {
		n, perr := strconv.ParseInt(v, 10, 64)
		if perr != nil || n < 0 || n > 4294967295 {
			return nil, errInvalid(codeInvalidValue, "new_index", "The value %q is invalid for field \"new_index\".", v)
		}
		if n == 0 {
			return nil, errInvalid(codeRuleIndexZero, "new_index", "Export rule index 0 is not valid.")
		}
		newIndex = n
	}
	if newIndex == 0 {
		if err := c.patchBody(rulePatchFields, ruleResource); err != nil {
			return nil, err
		}
	} else if err := c.checkBody(rulePatchFields, ruleResource); err != nil {
		return nil, err
	}
	updated, err := parseRule(c.body, r, false)
	if err != nil {
		return nil, err
	}
	*r = *updated
	if newIndex != 0 && newIndex != r.Index {
		for _, other := range p.Rules {
			if other != r && other.Index >= newIndex {
				other.Index++
			}
		}
		r.Index = newIndex
	}
	return okReply(), nil
}

func (s *Simulator) deleteRule(c *call) (*reply, *apiError) {
	p, err := c.policy("policy.id", policyMissing(c))
	if err != nil {
		return nil, err
	}
	r, err := c.rule(p)
	if err != nil {
		return nil, err
	}
	kept := p.Rules[:0]
	for _, other := range p.Rules {
		if other != r {
			kept = append(kept, other)
		}
	}
	p.Rules = kept
	return &reply{status: http.StatusOK}, nil
}
