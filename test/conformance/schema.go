// Package conformance checks the project's two halves that speak ONTAP's
// REST API — the client (backends/ontap/rest) and the simulator
// (test/ontapsim) — against ONTAP's own definition of that API, so that a
// field-name mistake made in both is not missed: they were written from the
// same notes.
//
// The field paths of each resource come from the go-swagger models of
// ONTAP's published REST API definition (testdata/ontap-fields.txt, made
// by ./gen). The test records what the client sends and the simulator
// returns while the ontap-nas and ontap-san drivers run their flows, and
// checks every field: `fields=`, query filters, request bodies and the
// records returned (docs/design/ontap-rest.md §8).
package conformance

import (
	_ "embed"
	"fmt"
	"strings"
)

//go:embed testdata/ontap-fields.txt
var fieldsData string

// Kind is what a field's JSON value is.
type Kind string

const (
	Object  Kind = "object"
	Objects Kind = "objects" // an array of objects
	Scalar  Kind = "scalar"
	Scalars Kind = "scalars" // an array of scalars
)

// Schema holds the field paths of each resource: resource -> path -> kind.
type Schema map[string]map[string]Kind

// LoadSchema parses testdata/ontap-fields.txt.
func LoadSchema() (Schema, error) {
	s := Schema{}
	for i, line := range strings.Split(fieldsData, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("ontap-fields.txt:%d: %q", i+1, line)
		}
		if s[f[0]] == nil {
			s[f[0]] = map[string]Kind{}
		}
		s[f[0]][f[1]] = Kind(f[2])
	}
	return s, nil
}

// routes map API paths (below /api, "*" one segment) to their resource.
var routes = []struct{ pattern, resource string }{
	{"cluster", "cluster"},
	{"cluster/nodes", "cluster-node"},
	{"cluster/nodes/*", "cluster-node"},
	{"cluster/jobs", "job"},
	{"cluster/jobs/*", "job"},
	{"svm/svms", "svm"},
	{"svm/svms/*", "svm"},
	{"network/ip/interfaces", "ip-interface"},
	{"network/ip/interfaces/*", "ip-interface"},
	{"storage/aggregates", "aggregate"},
	{"storage/aggregates/*", "aggregate"},
	{"storage/snapshot-policies", "snapshot-policy"},
	{"storage/snapshot-policies/*", "snapshot-policy"},
	{"storage/volumes", "volume"},
	{"storage/volumes/*", "volume"},
	{"storage/volumes/*/snapshots", "snapshot"},
	{"storage/volumes/*/snapshots/*", "snapshot"},
	{"storage/luns", "lun"},
	{"storage/luns/*", "lun"},
	{"storage/luns/*/attributes", "lun-attribute"},
	{"storage/luns/*/attributes/*", "lun-attribute"},
	{"storage/qos/policies", "qos-policy"},
	{"storage/qos/policies/*", "qos-policy"},
	{"application/consistency-groups", "consistency-group"},
	{"application/consistency-groups/*", "consistency-group"},
	{"application/consistency-groups/*/snapshots", "consistency-group-snap"},
	{"application/consistency-groups/*/snapshots/*", "consistency-group-snap"},
	{"storage/qtrees", "qtree"},
	{"storage/qtrees/*/*", "qtree"},
	{"storage/quota/rules", "quota-rule"},
	{"storage/quota/rules/*", "quota-rule"},
	{"protocols/san/lun-maps", "lun-map"},
	{"protocols/san/lun-maps/*/*", "lun-map"},
	{"protocols/san/lun-maps/*/*/reporting-nodes", "lun-map-reporting-node"},
	{"protocols/san/lun-maps/*/*/reporting-nodes/*", "lun-map-reporting-node"},
	{"protocols/san/igroups", "igroup"},
	{"protocols/san/igroups/*", "igroup"},
	{"protocols/san/igroups/*/initiators", "igroup-initiator"},
	{"protocols/san/igroups/*/initiators/*", "igroup-initiator"},
	{"protocols/san/iscsi/services", "iscsi-service"},
	{"protocols/san/iscsi/services/*", "iscsi-service"},
	{"protocols/san/iscsi/credentials", "iscsi-credentials"},
	{"protocols/san/iscsi/credentials/*/*", "iscsi-credentials"},
	{"protocols/nfs/export-policies", "export-policy"},
	{"protocols/nfs/export-policies/*", "export-policy"},
	{"protocols/nfs/export-policies/*/rules", "export-rule"},
	{"protocols/nfs/export-policies/*/rules/*", "export-rule"},
}

// Resource names the resource an API path ("/api/storage/volumes/<uuid>")
// addresses, and the route it matched ("storage/volumes/*"); ok is false
// for a path of no resource here.
func Resource(path string) (resource, route string, ok bool) {
	rest, found := strings.CutPrefix(path, "/api/")
	if !found {
		return "", "", false
	}
	segs := strings.Split(strings.Trim(rest, "/"), "/")
	for _, r := range routes {
		if matchSegments(strings.Split(r.pattern, "/"), segs) {
			return r.resource, r.pattern, true
		}
	}
	return "", "", false
}

func matchSegments(pattern, segs []string) bool {
	if len(pattern) != len(segs) {
		return false
	}
	for i, p := range pattern {
		if p != "*" && p != segs[i] {
			return false
		}
	}
	return true
}
