package nodeinfo

import "encoding/json"

// TridentNode is Trident's node JSON (models.Node; 20.10 utils.Node): the
// body of PUT /trident/v1/node/<name> and, but for TopologyLabels, the
// top-level fields of a TridentNode resource. Fields Trident defines but
// ontap-csi does not use are carried through unchanged. The field names are
// Trident's: a Trident controller reads what our node plugin sends, and a
// Trident rolled back to reads the TridentNodes we wrote.
type TridentNode struct {
	Name        string              `json:"name"`
	IQN         string              `json:"iqn,omitempty"`
	NQN         string              `json:"nqn,omitempty"`
	HostWWPNMap map[string][]string `json:"hostWWPNMap,omitempty"`
	IPs         []string            `json:"ips,omitempty"`
	// TopologyLabels is part of the REST body only; Trident does not store it.
	TopologyLabels   map[string]string `json:"topologyLabels,omitempty"`
	NodePrep         json.RawMessage   `json:"nodePrep,omitempty"`
	HostInfo         json.RawMessage   `json:"hostInfo,omitempty"`
	Deleted          bool              `json:"deleted"`
	PublicationState string            `json:"publicationState,omitempty"`
	LogLevel         string            `json:"logLevel,omitempty"`
	LogWorkflows     string            `json:"logWorkflows,omitempty"`
	LogLayers        string            `json:"logLayers,omitempty"`
}

// AddNodeResponse is the controller's answer to PUT /trident/v1/node/<name>
// (Trident's frontend/rest AddNodeResponse): the topology labels of the
// node's Kubernetes Node, which a Trident node plugin reports in
// NodeGetInfo, or what went wrong.
type AddNodeResponse struct {
	Name           string            `json:"name"`
	TopologyLabels map[string]string `json:"topologyLabels,omitempty"`
	Error          string            `json:"error,omitempty"`
}
