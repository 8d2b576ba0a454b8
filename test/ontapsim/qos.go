package ontapsim

import "net/http"

// QoS policy groups (docs/design/ontap-rest.md §3.12): fixed ones that an
// administrator makes for an SVM, and the adaptive ones every cluster has.
// Volumes, LUNs and qtrees name theirs; a name that no group of the SVM
// or cluster carries is refused, as ONTAP does. The simulator enforces no
// throughput limit.

type qosPolicyState struct {
	UUID     string `json:"uuid"`
	Name     string `json:"name"`
	SVM      string `json:"svm,omitempty"` // uuid; "" for a cluster-scoped group
	Adaptive bool   `json:"adaptive,omitempty"`
	MaxIOPS  int64  `json:"max_iops,omitempty"` // fixed groups
}

// builtinAdaptiveQoS are the adaptive policy groups ONTAP creates with the
// cluster (ONTAP 9.3+), owned by the admin SVM.
var builtinAdaptiveQoS = []string{"extreme", "performance", "value"}

// qosNone names no policy group: set on an object, it takes the object out
// of its group (the CLI's "-qos-policy-group none"; **guess** for REST).
const qosNone = "none"

var qosPolicyResource = &resource{
	schema: newSchema(`uuid name scope svm.name svm.uuid object_count fixed.max_throughput_iops
		fixed.capacity_shared adaptive.expected_iops adaptive.peak_iops _links`),
	keys:    []string{"uuid", "name"},
	sortKey: "name",
}

var qosPolicyPostFields = newSchema(`name svm.name svm.uuid fixed.max_throughput_iops fixed.capacity_shared
	adaptive.expected_iops adaptive.peak_iops`)

func (s *Simulator) qosRoutes() {
	s.add(get, "/api/storage/qos/policies", req, s.getQoSPolicies)
	s.add(post, "/api/storage/qos/policies", mut, s.postQoSPolicy, withResource(qosPolicyResource))
}

func builtinQoSPolicies() []*qosPolicyState {
	var out []*qosPolicyState
	for _, n := range builtinAdaptiveQoS {
		out = append(out, &qosPolicyState{UUID: newUUID(), Name: n, Adaptive: true})
	}
	return out
}

func (s *Simulator) renderQoSPolicy(p *qosPolicyState) map[string]any {
	rec := map[string]any{"uuid": p.UUID, "name": p.Name, "scope": "cluster",
		"_links": selfLink("/api/storage/qos/policies/" + p.UUID)}
	if svm := s.m.svm(p.SVM); svm != nil {
		rec["scope"] = "svm"
		rec["svm"] = map[string]any{"name": svm.Name, "uuid": svm.UUID}
	}
	if p.Adaptive {
		rec["adaptive"] = map[string]any{"expected_iops": 1000, "peak_iops": 5000}
	} else {
		rec["fixed"] = map[string]any{"max_throughput_iops": p.MaxIOPS, "capacity_shared": false}
	}
	count := 0
	for _, v := range s.m.Volumes {
		if v.QoSPolicy == p.Name {
			count++
		}
	}
	for _, l := range s.m.LUNs {
		if l.QoSPolicy == p.Name {
			count++
		}
	}
	rec["object_count"] = count
	return rec
}

func (s *Simulator) getQoSPolicies(c *call) (*reply, *apiError) {
	var recs []map[string]any
	for _, p := range s.m.QoSPolicies {
		recs = append(recs, s.renderQoSPolicy(p))
	}
	return c.list(qosPolicyResource, recs)
}

func (s *Simulator) postQoSPolicy(c *call) (*reply, *apiError) {
	b := c.body
	if err := c.checkBody(qosPolicyPostFields, qosPolicyResource); err != nil {
		return nil, err
	}
	svm, err := c.resolveSVM(b, true)
	if err != nil {
		return nil, err
	}
	name, _ := b.str("name")
	iops, _ := b.integer("fixed.max_throughput_iops")
	adaptive := b.has("adaptive")
	if b.err != nil {
		return nil, b.err
	}
	if name == "" || name == qosNone {
		return nil, errInvalid(codeInvalidValue, "name", "Invalid policy group name %q.", name)
	}
	if s.m.qosPolicy(svm.UUID, name) != nil {
		return nil, errConflict(codeDuplicate, "name", "Duplicate entry: policy group %q already exists.", name)
	}
	p := &qosPolicyState{UUID: newUUID(), Name: name, SVM: svm.UUID, Adaptive: adaptive, MaxIOPS: iops}
	s.m.QoSPolicies = append(s.m.QoSPolicies, p)
	return c.created(s.renderQoSPolicy(p), "/api/storage/qos/policies/"+p.UUID), nil
}

// qosPolicy is the group called name that objects of the SVM can use: the
// SVM's own or the cluster's.
func (m *model) qosPolicy(svm, name string) *qosPolicyState {
	for _, p := range m.QoSPolicies {
		if p.Name == name && (p.SVM == "" || p.SVM == svm) {
			return p
		}
	}
	return nil
}

// resolveQoS checks the policy group an object of svm is to be put in, and
// returns what the object then records: "" for none.
func (s *Simulator) resolveQoS(svm, name, target string) (string, *apiError) {
	if name == "" || name == qosNone {
		return "", nil
	}
	if s.m.qosPolicy(svm, name) == nil {
		// ONTAP's code for this is not documented (**guess**): the
		// generic "entry doesn't exist".
		return "", newError(http.StatusNotFound, codeNotFound, target, "Policy group %q does not exist.", name)
	}
	return name, nil
}

// resolveQoSChange is resolveQoS for a PATCH: nil when it sets no group.
func (s *Simulator) resolveQoSChange(svm string, name *string, target string) (*string, *apiError) {
	if name == nil {
		return nil, nil
	}
	q, err := s.resolveQoS(svm, *name, target)
	if err != nil {
		return nil, err
	}
	return &q, nil
}
