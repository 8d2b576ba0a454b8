package nodeinfo

import "strings"

// TopologyPrefix is the label key prefix Trident takes a node's topology
// from (its config.TopologyKeyPrefixes): a Node label whose key starts with
// it is a topology segment, value as labelled. It is matched as a plain
// string prefix, as Trident does, so topology.kubernetes.io/zone and
// topology.kubernetes.io/region match and failure-domain.beta.kubernetes.io/zone
// does not.
const TopologyPrefix = "topology.kubernetes.io"

// TopologyLabels picks a Node's topology labels: what Trident's controller
// answers a registering node with (docs/design/trident-compat.md §3.1), and
// what ontap-csi's node plugin reports in NodeGetInfo when no
// --node-topology is given. Never nil.
func TopologyLabels(labels map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range labels {
		if strings.HasPrefix(k, TopologyPrefix) {
			out[k] = v
		}
	}
	return out
}
