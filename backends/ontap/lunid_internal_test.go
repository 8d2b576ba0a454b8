package ontap

import (
	"testing"

	"github.com/ontap-csi/ontap-csi/backends/ontap/rest"
)

// The start's listing of the maps keys each map by the igroup a publish
// re-makes it through: this installation's per-node igroup, also for a
// map through Trident's per-node igroup of the same node; our own map wins
// over Trident's; a shared igroup names no node and an entry the process
// has already is kept.
func TestLUNIDSeed(t *testing.T) {
	const (
		ours   = "6f1c9d1e-0d6a-5c56-9b1f-3c1f3c2d4e5f"
		theirs = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
	)
	long := "node-with-a-very-long-name-that-ontap-igroup-names-cannot-hold-whole-" + "x"
	var c lunIDCache
	c.put("lun-k", igroupName("w1", ours), 7) // seen by a publish since
	c.seed([]rest.LUNMap{
		{LUNUUID: "lun-a", IgroupName: igroupName("w1", ours), LUNID: 3},
		{LUNUUID: "lun-b", IgroupName: "w1-" + theirs, LUNID: 4},
		{LUNUUID: "lun-c", IgroupName: "w1-" + theirs, LUNID: 5}, // Trident's first in the listing
		{LUNUUID: "lun-c", IgroupName: igroupName("w1", ours), LUNID: 6},
		{LUNUUID: "lun-d", IgroupName: "trident-" + theirs[:8], LUNID: 1},
		{LUNUUID: "lun-e", IgroupName: igroupName(long, ours), LUNID: 2},
		{LUNUUID: "lun-k", IgroupName: igroupName("w1", ours), LUNID: 9},
		{LUNUUID: "", IgroupName: igroupName("w1", ours), LUNID: 8},
	}, ours)
	for _, tc := range []struct {
		lun, igroup string
		want        int
		ok          bool
	}{
		{"lun-a", igroupName("w1", ours), 3, true},
		{"lun-b", igroupName("w1", ours), 4, true},
		{"lun-c", igroupName("w1", ours), 6, true},
		{"lun-d", igroupName("trident", ours), 0, false},
		{"lun-e", igroupName(long, ours), 2, true},
		{"lun-k", igroupName("w1", ours), 7, true},
		{"lun-a", igroupName("w2", ours), 0, false},
	} {
		if id, ok := c.get(tc.lun, tc.igroup); id != tc.want || ok != tc.ok {
			t.Errorf("%s via %s: %d %v, want %d %v", tc.lun, tc.igroup, id, ok, tc.want, tc.ok)
		}
	}
	if !c.isSeeded() {
		t.Error("not marked seeded")
	}
}
