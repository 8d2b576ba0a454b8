package backends

import (
	"context"
	"errors"
)

// Fencer is a Backend that can cut a node off a volume on the storage
// system and confirm it, for a node that may still be running but must no
// longer write (Kubernetes non-graceful node shutdown, Trident's
// --enable_force_detach; docs/design/fencing.md §3).
type Fencer interface {
	// Fence removes every access nodeName (node, when known, gives its
	// IQN and addresses) has to vol, then reads the storage system again,
	// bypassing whatever this backend remembers, and returns nil only
	// when that read shows no access left. Removed lists what was taken
	// away, for the log; a repeated call removes nothing and returns nil.
	// Access that cannot be removed, or a read that does not confirm the
	// node is cut off, is an error wrapping ErrNotFenced (or the kind of
	// the storage system's failure): the caller must not report the
	// volume detached.
	Fence(ctx context.Context, vol *Volume, nodeName string, node *Node) (removed []string, err error)
}

// ErrNotFenced is the kind of a fence that did not hold: access of the
// node remains on the storage system, or could not be ruled out. The CO
// retries the detach (Unavailable); the volume must not be attached
// elsewhere meanwhile.
var ErrNotFenced = errors.New("node not fenced")
