package e2e

import (
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// --max-volumes-per-node reaches kubelet through NodeGetInfo (Trident
// #859: without it the scheduler over-commits a node's LUNs and mounts).
func TestMaxVolumesPerNode(t *testing.T) {
	r := newRig(t, rigOptions{})
	for _, tc := range []struct {
		args []string
		want int64
	}{
		{nil, 0},
		{[]string{"--max-volumes-per-node=24"}, 24},
	} {
		p := r.startPlugin(pluginOptions{args: tc.args})
		info, err := p.Node.NodeGetInfo(ctxT(t), &csi.NodeGetInfoRequest{})
		if err != nil || info.GetNodeId() != nodeID || info.GetMaxVolumesPerNode() != tc.want {
			t.Errorf("%v: NodeGetInfo %v, %v; want max %d", tc.args, info, err, tc.want)
		}
		p.Stop()
	}
}
