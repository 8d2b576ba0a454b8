package ontap

import (
	"context"
	"time"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/rest"
)

// qtreePools is the poolKind of ontap-nas-economy: members are qtrees,
// their bytes the hard limits of their tree quotas.
type qtreePools struct{ n *nasEconomyDriver }

func (k qtreePools) inventory(ctx context.Context) (map[string]poolUse, error) {
	n := k.n
	qs, err := n.client.ListQtrees(ctx, n.eco.prefix+"*", "")
	if err != nil {
		return nil, n.failure(err, "listing the qtrees of the pools")
	}
	rules, err := n.client.ListQuotaRules(ctx, n.eco.prefix+"*", "")
	if err != nil {
		return nil, n.failure(err, "listing the quota rules of the pools")
	}
	out := map[string]poolUse{}
	for _, q := range qs {
		u := out[q.Volume]
		u.members++
		u.all++
		out[q.Volume] = u
	}
	for _, r := range rules {
		if r.Qtree != "" && r.HardLimit > 0 {
			u := out[r.Volume]
			u.bytes += r.HardLimit
			out[r.Volume] = u
		}
	}
	return out, nil
}

// use counts a pool's members by their quota rules: one request, and the
// bytes come with them.
func (k qtreePools) use(ctx context.Context, p *rest.Volume) (poolUse, error) {
	rules, err := k.n.client.VolumeQuotaRules(ctx, p.UUID)
	if err != nil {
		return poolUse{}, k.n.failure(err, "reading the quota rules of %s", p.Name)
	}
	var u poolUse
	for _, r := range rules {
		if r.Qtree != "" {
			u.members++
			u.all++
			u.bytes += max(r.HardLimit, 0)
		}
	}
	return u, nil
}

func (k qtreePools) count(ctx context.Context, p *rest.Volume) (int, error) {
	n, err := k.n.client.CountQtrees(ctx, p.UUID)
	if err != nil {
		return 0, k.n.failure(err, "counting the qtrees of %s", p.Name)
	}
	return n, nil
}

// createPool makes a FlexVol as Trident's createFlexvolForQtree does:
// mode 0711, UNIX security, mounted at /<name>, on the empty export policy
// with autoExportPolicy (qtree pool policy otherwise), then readies its
// quotas.
func (k qtreePools) createPool(ctx context.Context, name string, a poolAttrs, size int64) error {
	n := k.n
	policy := qtreePoolPolicy
	if n.cfg.AutoExportPolicy {
		policy = emptyPolicyName(n.cfg.StoragePrefix)
		if err := n.ensureEmptyPolicy(ctx); err != nil {
			return err
		}
	}
	reserve := a.snapshotReserve
	err := n.client.CreateVolume(ctx, rest.VolumeCreate{
		Name: name, Aggregate: a.aggregate, Size: size, SpaceReserve: a.spaceReserve, SnapshotPolicy: a.snapshotPolicy,
		SnapshotReservePercent: &reserve, SnapshotDirAccess: a.snapshotDir, UnixPermissions: "0711", ExportPolicy: policy,
		SecurityStyle: "unix", JunctionPath: "/" + name, Encryption: a.encryption, TieringPolicy: a.tieringPolicy,
	})
	if err != nil {
		return err
	}
	v, err := n.client.GetVolume(ctx, name)
	if err != nil {
		return err
	}
	return k.prepare(ctx, v)
}

// prepare gives a pool the default tree rule (so that the rules of new
// qtrees apply by resize, as Trident's addDefaultQuotaForFlexvol intends)
// and turns its quotas on, waiting for their initialization.
func (k qtreePools) prepare(ctx context.Context, p *rest.Volume) error {
	n := k.n
	if p.QuotaState == "on" {
		return nil
	}
	if err := n.client.CreateQuotaRule(ctx, p.Name, "", -1); err != nil && !rest.IsAlreadyExists(err) && !rest.IsQuotaNotInForce(err) {
		return n.failure(err, "adding the default tree quota to %s", p.Name)
	}
	return n.quotasOn(ctx, p)
}

// quotasOn turns a pool's quotas on and waits until ONTAP has initialized
// them: until then nothing is enforced.
func (n *nasEconomyDriver) quotasOn(ctx context.Context, p *rest.Volume) error {
	state, err := n.client.VolumeQuotaState(ctx, p.UUID)
	if err == nil && state == "off" {
		err = n.client.SetVolumeQuota(ctx, p.UUID, true)
	}
	for delay := 100 * time.Millisecond; err == nil && state != "on"; delay = min(2*delay, 2*time.Second) {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return backends.Errorf(backends.ErrPending, "quotas of %s are still initializing", p.Name)
		}
		state, err = n.client.VolumeQuotaState(ctx, p.UUID)
		if state == "corrupt" {
			return backends.Errorf(backends.ErrUnavailable, "quotas of %s are corrupt; repair them on ONTAP", p.Name)
		}
	}
	if err != nil {
		return n.failure(err, "turning the quotas of %s on", p.Name)
	}
	return nil
}

// reinitializeQuotas turns a pool's quotas off and on again, which puts
// every rule in force.
func (n *nasEconomyDriver) reinitializeQuotas(ctx context.Context, p *rest.Volume) error {
	if err := n.client.SetVolumeQuota(ctx, p.UUID, false); err != nil {
		return n.failure(err, "turning the quotas of %s off to reinitialize them", p.Name)
	}
	return n.quotasOn(ctx, p)
}
