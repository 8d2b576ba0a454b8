package ontap

import (
	"context"
	"slices"
	"strings"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/rest"
)

var _ backends.Fencer = (*sanDriver)(nil)

// Fence cuts a node off a LUN (ontap-san, and ontap-san-economy, which
// embeds this driver): the LUN is unmapped from the node's per-node
// igroups, ours and Trident's, as Unpublish does; then the LUN's maps are
// read again from ONTAP and every igroup still mapped is read for the
// node's IQN (docs/design/fencing.md §3.2). A LUN reached through a shared
// igroup holding the IQN (Trident 20.10's "trident") is not fenced: taking
// the IQN out of it would cut the node off every LUN of that igroup, and
// ONTAP refuses it while the igroup is mapped; the call fails, and stays
// failing until an admin removes the IQN.
func (s *sanDriver) Fence(ctx context.Context, vol *backends.Volume, nodeName string, node *backends.Node) ([]string, error) {
	if nodeName == "" {
		return nil, backends.Errorf(backends.ErrInvalid, "fencing needs the node's name")
	}
	h := handleOf(vol)
	if h == nil || h.lun == nil {
		return nil, nil
	}
	maps, err := s.client.ListLUNMaps(ctx, h.lun.Path, "")
	if err != nil {
		return nil, s.failure(err, "reading the maps of LUN %s", h.lun.Path)
	}
	var removed []string
	for _, m := range maps {
		if isNodeIgroup(m.IgroupName, nodeName, s.installationID) {
			removed = append(removed, "LUN map "+m.LUNPath+" -> igroup "+m.IgroupName)
		}
	}
	if len(removed) > 0 {
		if err := s.Unpublish(ctx, vol, nodeName, node); err != nil {
			return nil, err
		}
	}
	return removed, s.confirmLUNFenced(ctx, h.lun.Path, nodeName, node)
}

// confirmLUNFenced reads the LUN's maps and their igroups from ONTAP, not
// from the volume's handle, and fails with ErrNotFenced while any of them
// may still admit the node.
func (s *sanDriver) confirmLUNFenced(ctx context.Context, lunPath, nodeName string, node *backends.Node) error {
	maps, err := s.client.ListLUNMaps(ctx, lunPath, "")
	if err != nil {
		return s.failure(err, "confirming the fence: reading the maps of LUN %s", lunPath)
	}
	iqn := ""
	if node != nil {
		iqn = node.IQN
	}
	var left []string
	for _, m := range maps {
		if isNodeIgroup(m.IgroupName, nodeName, s.installationID) {
			left = append(left, "its igroup "+m.IgroupName+" is still mapped")
			continue
		}
		if iqn == "" {
			// Without the IQN, membership cannot be checked: another
			// igroup may hold it.
			left = append(left, "igroup "+m.IgroupName+" may hold its initiator (its IQN is unknown)")
			continue
		}
		ig, err := s.client.GetIgroup(ctx, m.IgroupName)
		if rest.IsNotFound(err) {
			continue // deleted meanwhile: it admits nobody
		}
		if err != nil {
			return s.failure(err, "confirming the fence: reading igroup %s", m.IgroupName)
		}
		if slices.Contains(ig.Initiators, iqn) {
			left = append(left, "igroup "+m.IgroupName+" holds its initiator "+iqn)
		}
	}
	if len(left) > 0 {
		return backends.Errorf(backends.ErrNotFenced, "node %s still reaches LUN %s: %s", nodeName, lunPath, strings.Join(left, "; "))
	}
	return nil
}
