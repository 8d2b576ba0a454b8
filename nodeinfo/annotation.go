// Package nodeinfo is the contract by which a node plugin tells the
// controller who its node is: a backends.Node (name, iSCSI initiator name,
// IP addresses). Node and controller never import each other, so both take
// the carriers of that fact from here:
//
//   - the Node annotation of ontap-csi's own install (AnnotationKey):
//     node/kubenode writes it, controller/kubenodes reads it;
//   - Trident's node JSON (TridentNode): the body of PUT
//     /trident/v1/node/<name>, which node/controllerapi sends and
//     controller/tridentrest receives, and the top-level fields of a
//     TridentNode resource (controller/tridentnodes).
package nodeinfo

import (
	"encoding/json"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/ontap-csi/ontap-csi/backends"
)

// AnnotationKey is the Node annotation holding a node's info.
const AnnotationKey = "csi.trident.netapp.io/node-info"

// NodesGVR is the core Node resource, which carries the annotation.
var NodesGVR = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}

// annotation is the annotation's JSON value. Field names are those of
// Trident's node JSON (TridentNode), which carries the same facts.
type annotation struct {
	Name string   `json:"name"`
	IQN  string   `json:"iqn,omitempty"`
	IPs  []string `json:"ips,omitempty"`
}

// Annotation is the annotation value that reports n.
func Annotation(n backends.Node) (string, error) {
	data, err := json.Marshal(annotation{Name: n.Name, IQN: n.IQN, IPs: slices.Clone(n.IPs)})
	return string(data), err
}

// ParseAnnotation reads an annotation value. Fields it does not know (a
// newer writer's) are ignored.
func ParseAnnotation(value string) (backends.Node, error) {
	var a annotation
	if err := json.Unmarshal([]byte(value), &a); err != nil {
		return backends.Node{}, err
	}
	return backends.Node{Name: a.Name, IQN: a.IQN, IPs: a.IPs}, nil
}
