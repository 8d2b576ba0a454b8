package ontapsim

import (
	"sort"
	"strings"
)

// FieldSchema is what the simulator accepts for one resource: the fields
// a GET may return, ask for (fields=) or filter on, and the keys a POST or
// PATCH body may hold. test/conformance checks them against ONTAP's own
// definition of the resource.
type FieldSchema struct {
	// Route is the collection's path below /api, "*" for a key segment:
	// "storage/volumes/*/snapshots".
	Route    string
	Readable []string
	Post     []string
	Patch    []string
}

// FieldSchemas lists the simulator's field schemas.
func FieldSchemas() []FieldSchema {
	list := func(ss ...schema) []string {
		var out []string
		for _, s := range ss {
			for p := range s {
				if p != "_links" && !strings.HasPrefix(p, "_links.") {
					out = append(out, p)
				}
			}
		}
		sort.Strings(out)
		return out
	}
	fs := func(route string, res *resource, post, patch []schema) FieldSchema {
		return FieldSchema{Route: route, Readable: list(res.schema), Post: list(post...), Patch: list(patch...)}
	}
	none := []schema(nil)
	return []FieldSchema{
		fs("cluster", clusterResource, none, none),
		fs("cluster/nodes", nodeResource, none, none),
		fs("cluster/jobs", jobResource, none, none),
		fs("svm/svms", svmResource, none, none),
		fs("network/ip/interfaces", lifResource, none, none),
		fs("storage/aggregates", aggrResource, none, none),
		fs("storage/snapshot-policies", snapPolicyResource, none, none),
		fs("storage/qos/policies", qosPolicyResource, []schema{qosPolicyPostFields}, none),
		fs("application/consistency-groups", cgResource, []schema{cgPostFields}, none),
		fs("application/consistency-groups/*/snapshots", cgSnapshotResource, []schema{cgSnapshotPostFields}, none),
		fs("storage/volumes", volumeResource, []schema{volumePostFields, cloneCreateFields}, []schema{volumePatchFields}),
		fs("storage/volumes/*/snapshots", snapshotResource, []schema{snapshotPostFields}, []schema{snapshotPatchFields}),
		fs("storage/luns", lunResource, []schema{lunPostFields}, []schema{lunPatchFields}),
		fs("storage/luns/*/attributes", lunAttrResource, []schema{lunAttrPostFields}, []schema{lunAttrPatchFields}),
		fs("protocols/san/igroups", igroupResource, []schema{igroupPostFields}, []schema{igroupPatchFields}),
		fs("protocols/san/igroups/*/initiators", initiatorResource, []schema{initiatorFields}, none),
		fs("protocols/san/lun-maps", lunMapResource, []schema{lunMapPostFields}, none),
		fs("protocols/san/lun-maps/*/*/reporting-nodes", reportingNodeResource, []schema{reportingNodePostFields}, none),
		fs("protocols/san/iscsi/services", iscsiServiceResource, none, []schema{iscsiServicePatchFields}),
		fs("protocols/san/iscsi/credentials", credentialResource, []schema{credentialPostFields}, []schema{credentialPatchFields}),
		fs("protocols/nfs/export-policies", policyResource, []schema{policyPostFields}, []schema{policyPatchFields}),
		fs("protocols/nfs/export-policies/*/rules", ruleResource, []schema{rulePostFields}, []schema{rulePatchFields}),
	}
}
