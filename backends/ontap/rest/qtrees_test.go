package rest

import (
	"context"
	"testing"

	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

func TestSimQtreesAndQuotas(t *testing.T) {
	s, c := startSim(t, ontapsim.Config{}, nil)
	ctx := context.Background()
	check(t, c.CreateVolume(ctx, VolumeCreate{Name: "pool", Aggregate: s.Info().Aggregates[0], Size: 1 << 30, JunctionPath: "/pool"}))
	pool := must(c.GetVolume(ctx, "pool"))(t)
	if pool.QuotaState != "off" {
		t.Errorf("quota state of a new volume %q", pool.QuotaState)
	}
	check(t, c.CreateQuotaRule(ctx, "pool", "", -1))
	check(t, c.SetVolumeQuota(ctx, pool.UUID, true))
	if st := must(c.VolumeQuotaState(ctx, pool.UUID))(t); st != "on" {
		t.Fatalf("quota state %q", st)
	}

	check(t, c.CreateQtree(ctx, QtreeCreate{Volume: "pool", Name: "q1", UnixPermissions: "0777", SecurityStyle: "unix"}))
	qs := must(c.ListQtrees(ctx, "po*", ""))(t)
	if len(qs) != 1 || qs[0].Name != "q1" || qs[0].ID != 1 || qs[0].VolumeUUID != pool.UUID || qs[0].UnixPermissions != "777" ||
		qs[0].Path != "/pool/q1" || qs[0].ExportPolicy != "default" {
		t.Fatalf("qtrees %+v", qs)
	}
	if n := must(c.CountQtrees(ctx, pool.UUID))(t); n != 1 {
		t.Errorf("count %d", n)
	}
	check(t, c.CreateQuotaRule(ctx, "pool", "q1", 1<<30))
	if err := c.CreateQuotaRule(ctx, "pool", "q1", 1<<30); !IsAlreadyExists(err) {
		t.Errorf("second rule: %v", err)
	}
	rules := must(c.VolumeQuotaRules(ctx, pool.UUID))(t)
	if len(rules) != 2 {
		t.Fatalf("rules %+v", rules)
	}
	var q1 QuotaRule
	for _, r := range rules {
		if r.Qtree == "q1" {
			q1 = r
		}
	}
	check(t, c.SetQuotaLimit(ctx, q1.UUID, 2<<30))
	if got := must(c.ListQuotaRules(ctx, "pool", "q1"))(t); len(got) != 1 || got[0].HardLimit != 2<<30 {
		t.Errorf("after resize %+v", got)
	}
	pol := "default"
	check(t, c.ModifyQtree(ctx, pool.UUID, 1, QtreeModify{ExportPolicy: &pol}))
	check(t, c.DeleteQtree(ctx, pool.UUID, 1))
	if err := c.DeleteQtree(ctx, pool.UUID, 1); !IsNotFound(err) {
		t.Errorf("second delete: %v", err)
	}
	if got := must(c.ListQuotaRules(ctx, "pool", "q1"))(t); len(got) != 0 {
		t.Errorf("the qtree's rule outlived it: %+v", got)
	}
}

func TestSimQuotaRuleNeedsReinitialization(t *testing.T) {
	s, c := startSim(t, ontapsim.Config{}, nil)
	ctx := context.Background()
	check(t, c.CreateVolume(ctx, VolumeCreate{Name: "bare", Aggregate: s.Info().Aggregates[0], Size: 1 << 30, JunctionPath: "/bare"}))
	v := must(c.GetVolume(ctx, "bare"))(t)
	check(t, c.SetVolumeQuota(ctx, v.UUID, true))
	check(t, c.CreateQtree(ctx, QtreeCreate{Volume: "bare", Name: "q"}))
	if err := c.CreateQuotaRule(ctx, "bare", "q", 1<<20); !IsQuotaNotInForce(err) {
		t.Fatalf("rule without a default rule: %v", err)
	}
}

func TestSimLUNClone(t *testing.T) {
	s, c := startSim(t, ontapsim.Config{MaxLUNsPerVolume: 2}, nil)
	ctx := context.Background()
	check(t, c.CreateVolume(ctx, VolumeCreate{Name: "bucket", Aggregate: s.Info().Aggregates[0], Size: 1 << 30}))
	src := must(c.CreateLUN(ctx, LUNCreate{Path: "/vol/bucket/a", Size: 1 << 20}))(t)
	check(t, c.SetLUNAttribute(ctx, src.UUID, "k", "v"))
	cl := must(c.CloneLUN(ctx, "/vol/bucket/a", "/vol/bucket/b"))(t)
	if cl.Size != src.Size || cl.SerialNumber == src.SerialNumber || cl.CreateTime.IsZero() {
		t.Errorf("clone %+v of %+v", cl, src)
	}
	if _, err := c.CloneLUN(ctx, "/vol/bucket/a", "/vol/bucket/b"); !IsAlreadyExists(err) && !IsLUNLimitReached(err) {
		t.Errorf("clone onto an existing LUN: %v", err)
	}
	if _, err := c.CreateLUN(ctx, LUNCreate{Path: "/vol/bucket/c", Size: 1 << 20}); !IsLUNLimitReached(err) {
		t.Errorf("third LUN: %v", err)
	}
	luns := must(c.ListLUNsWithAttributes(ctx, "/vol/bucket/*"))(t)
	if len(luns) != 2 || luns[0].Attributes["k"] != "v" || luns[1].Attributes["k"] != "v" {
		t.Errorf("LUNs with attributes %+v", luns)
	}
	check(t, c.DeleteLUN(ctx, cl.UUID))
}

func TestSimSnapshotComment(t *testing.T) {
	s, c := startSim(t, ontapsim.Config{}, nil)
	ctx := context.Background()
	check(t, c.CreateVolume(ctx, VolumeCreate{Name: "v", Aggregate: s.Info().Aggregates[0], Size: 1 << 30}))
	v := must(c.GetVolume(ctx, "v"))(t)
	check(t, c.CreateSnapshotWithComment(ctx, v.UUID, "s1", `{"x":"y"}`))
	if sn := must(c.GetSnapshot(ctx, v.UUID, "s1"))(t); sn.Comment != `{"x":"y"}` {
		t.Errorf("comment %q", sn.Comment)
	}
	if all := must(c.ListAllSnapshots(ctx, "v", "s1"))(t); len(all) != 1 || all[0].Comment != `{"x":"y"}` {
		t.Errorf("bulk %+v", all)
	}
}
