package backends

import "context"

// PublicationLister is a Backend that says, from its storage system's
// state rather than from any record of its own, which nodes each volume
// is published to now: the CSI ListVolumes' published_node_ids, from which
// external-attacher decides to publish again where access was lost
// (Trident #965, #1181).
type PublicationLister interface {
	// PublishedNodes returns, for each of vols (all of this backend), the
	// names of the nodes among nodes that the storage system lets reach
	// it, keyed by volume ID. It reads the storage system a fixed number
	// of times, however many volumes it is asked about. nodes are every
	// node the controller knows.
	PublishedNodes(ctx context.Context, vols []*Volume, nodes []Node) (map[string][]string, error)
}
