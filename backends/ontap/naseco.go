package ontap

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/rest"
)

// nasEconomyDriver is ontap-nas-economy: each volume a qtree, its size a
// tree quota, in pools of FlexVols (docs/design/economy.md §5.2).
type nasEconomyDriver struct {
	*nasDriver
	eco *economy

	pruneMu   sync.Mutex
	lastPrune time.Time
	pruning   bool
	pruneWG   sync.WaitGroup
	// life ends with Close, which stops a prune in flight.
	life context.Context
	end  context.CancelFunc
}

// qtreePoolPolicy is the export policy of qtree pools without
// autoExportPolicy: one rule for every IPv4 and IPv6 client, so that the
// qtrees' own policies decide (Trident's "<artifact>_qtree_pool_export_policy").
const qtreePoolPolicy = "trident_qtree_pool_export_policy"

func newNASEconomy(d *driver) *nasEconomyDriver {
	n := &nasEconomyDriver{nasDriver: &nasDriver{driver: d}}
	n.life, n.end = context.WithCancel(context.Background())
	n.eco = newEconomy(d, qtreePools{n}, qtreePoolPrefix(d.cfg.StoragePrefix), d.cfg.Economy.QtreesPerFlexvol)
	d.initProtocol = n.init
	return n
}

func (n *nasEconomyDriver) init(ctx context.Context) error {
	if err := n.nasDriver.init(ctx); err != nil {
		return err
	}
	if n.cfg.AutoExportPolicy {
		return nil
	}
	everyone := []rest.ExportRule{{Clients: []string{"0.0.0.0/0"}}, {Clients: []string{"::/0"}}}
	p, rules, created, err := n.policyWithRules(ctx, qtreePoolPolicy, everyone...)
	if err != nil {
		return backends.Errorf(backends.ErrUnavailable, "backend %s: %w", n.Name(), err)
	}
	if created || len(rules) > 0 {
		return nil
	}
	for _, r := range everyone {
		if _, err := n.client.AddExportRule(ctx, p.ID, r); err != nil && !rest.IsAlreadyExists(err) {
			return n.failure(err, "adding rule %s to export policy %s", r.Clients[0], qtreePoolPolicy)
		}
	}
	return nil
}

func (n *nasEconomyDriver) qtreeName(id string) string {
	return econInternalName(n.cfg.StoragePrefix, id, maxQtreeName)
}

// qtreeHandle is an ontap-nas-economy volume's backends.Volume.Handle.
type qtreeHandle struct {
	qtree rest.Qtree
	rule  *rest.QuotaRule // nil: the create stopped before the quota
}

func qtreeHandleOf(v *backends.Volume) *qtreeHandle {
	h, _ := v.Handle.(*qtreeHandle)
	return h
}

// findQtree looks a qtree up in every pool, as Trident does for a volume
// it knows by name only (QtreeExists): one qtree of that name, or none.
func (n *nasEconomyDriver) findQtree(ctx context.Context, name string) (*rest.Qtree, error) {
	qs, err := n.client.ListQtrees(ctx, n.eco.prefix+"*", name)
	if err != nil {
		return nil, n.failure(err, "looking up qtree %s", name)
	}
	switch len(qs) {
	case 0:
		return nil, backends.Errorf(backends.ErrNotFound, "qtree %s not found", name)
	case 1:
		return &qs[0], nil
	}
	return nil, backends.Errorf(backends.ErrAlreadyExists, "qtree %s exists in %d FlexVols (%s, %s): resolve it on ONTAP",
		name, len(qs), qs[0].Volume, qs[1].Volume)
}

// Volume implements backends.Backend: the qtree and its quota rule.
func (n *nasEconomyDriver) Volume(ctx context.Context, id string) (*backends.Volume, error) {
	return n.VolumeAt(ctx, id, n.qtreeName(id))
}

// VolumeAt implements backends.VolumeLocator: the qtree the volume's
// records name (a nameTemplate's, or one Trident named by another
// storagePrefix or by a UUID). Without it the ontap-nas driver's, which
// looks for a FlexVol, would be promoted here.
func (n *nasEconomyDriver) VolumeAt(ctx context.Context, id, internalName string) (*backends.Volume, error) {
	if !volumeNameRE.MatchString(internalName) || len(internalName) > maxQtreeName {
		// Not a qtree name of Trident's or ours: checked before ONTAP
		// is asked, the name going into a query.
		return nil, backends.Errorf(backends.ErrNotFound, "volume %s not found (%q is no qtree name)", id, internalName)
	}
	if err := n.ready(ctx); err != nil {
		return nil, err
	}
	q, err := n.findQtree(ctx, internalName)
	if err != nil {
		return nil, err
	}
	rules, err := n.quotaRules(ctx, q.Volume, q.Name)
	if err != nil {
		return nil, n.failure(err, "reading the quota of qtree %s", q.Name)
	}
	var rule *rest.QuotaRule
	if len(rules) > 0 {
		rule = &rules[0]
	}
	return n.toVolume(id, q, rule), nil
}

// toVolume describes a qtree for the controller. Its size is its hard
// limit; without a rule the create that made it has not finished.
func (n *nasEconomyDriver) toVolume(id string, q *rest.Qtree, rule *rest.QuotaRule) *backends.Volume {
	v := &backends.Volume{
		ID: id, Backend: n.Name(), AccessType: backends.AccessMount,
		Topologies: n.poolTopologies(""),
		Context: map[string]string{
			"backendUUID": n.backendUUID, "name": id, "internalName": q.Name, "protocol": string(backends.ProtocolFile),
		},
		Handle:     &qtreeHandle{qtree: *q, rule: rule},
		Incomplete: rule == nil,
	}
	if rule != nil && rule.HardLimit > 0 {
		v.SizeBytes = rule.HardLimit
	}
	return v
}

// ListVolumes implements backends.Backend: the qtrees of every pool whose
// names give back a volume ID, in two requests.
func (n *nasEconomyDriver) ListVolumes(ctx context.Context) ([]*backends.Volume, error) {
	if err := n.ready(ctx); err != nil {
		return nil, err
	}
	n.maybePrune(ctx)
	qs, err := n.client.ListQtrees(ctx, n.eco.prefix+"*", "")
	if err != nil {
		return nil, n.failure(err, "listing qtrees")
	}
	rules, err := n.client.ListQuotaRules(ctx, n.eco.prefix+"*", "")
	if err != nil {
		return nil, n.failure(err, "listing quota rules")
	}
	byTarget := make(map[string]*rest.QuotaRule, len(rules))
	for i := range rules {
		byTarget[rules[i].VolumeUUID+"/"+rules[i].Qtree] = &rules[i]
	}
	var out []*backends.Volume
	for i := range qs {
		if id, ok := econVolumeID(n.cfg.StoragePrefix, qs[i].Name); ok {
			out = append(out, n.toVolume(id, &qs[i], byTarget[qs[i].VolumeUUID+"/"+qs[i].Name]))
		}
	}
	return out, nil
}

// poolAttrs are the pool attributes of a new volume's settings.
func (n *nasEconomyDriver) poolAttrs(aggr string, s *settings) poolAttrs {
	dir := s.SnapshotDir
	return poolAttrs{
		aggregate: aggr, spaceReserve: s.SpaceReserve, snapshotPolicy: s.SnapshotPolicy,
		snapshotReserve: s.snapshotReserve, tieringPolicy: s.TieringPolicy, encryption: s.Encryption, snapshotDir: &dir,
	}
}

// CreatesFresh is false: an ontap-nas-economy volume is a qtree in a
// pool the create picks, and the create adopts one an earlier attempt
// made wherever it is; the controller looks first.
func (n *nasEconomyDriver) CreatesFresh() bool { return false }

// CreateVolume makes a qtree with its tree quota in a pool with room, or
// completes one an earlier attempt left without its quota.
func (n *nasEconomyDriver) CreateVolume(ctx context.Context, req *backends.CreateRequest) (*backends.Volume, error) {
	if err := n.ready(ctx); err != nil {
		return nil, err
	}
	n.maybePrune(ctx)
	if req.Source != nil {
		return nil, backends.Errorf(backends.ErrInvalid, "ontap-nas-economy volumes cannot be cloned (Trident: \"cloning is not supported by backend type ontap-nas-economy\")")
	}
	s, err := n.resolve(req)
	if err != nil {
		return nil, err
	}
	name, err := n.newQtreeName(ctx, req)
	if err != nil {
		return nil, err
	}
	q, err := n.findQtree(ctx, name)
	switch {
	case err == nil && name != n.qtreeName(req.Name):
		// A template's name need not be this volume's alone, and a
		// qtree records nothing of its volume: one of another size is
		// not this request's (docs/configuration.md, nameTemplate).
		if err := n.sameSize(ctx, req, q); err != nil {
			return nil, err
		}
		return n.complete(ctx, req, q)
	case err == nil:
		// An earlier attempt's: the naming rule's name is the volume's.
		return n.complete(ctx, req, q)
	case !errors.Is(err, backends.ErrNotFound):
		return nil, err
	}
	aggr, err := n.aggregateFor(ctx, req.Pool)
	if err != nil {
		return nil, err
	}
	if err := n.checkAggregateLimit(ctx, aggr, s.SpaceReserve, req.SizeBytes); err != nil {
		return nil, err
	}
	policy, err := n.newQtreePolicy(ctx, s, req.Options)
	if err != nil {
		return nil, err
	}
	c := rest.QtreeCreate{Name: name, UnixPermissions: s.UnixPermissions, ExportPolicy: policy, SecurityStyle: s.SecurityStyle, QoSPolicy: s.QoSPolicy}
	for try := 0; try < 4; try++ {
		r, err := n.eco.place(ctx, n.poolAttrs(aggr, s), req.SizeBytes)
		if err != nil {
			return nil, err
		}
		v, again, err := n.createIn(ctx, r, req, c)
		if !again || err != nil {
			return v, err
		}
	}
	return nil, backends.Errorf(backends.ErrUnavailable, "qtree %s: the pools chosen kept filling up or going away; retry", name)
}

// newQtreeName is the qtree of a new volume: what its pool's nameTemplate
// renders, else the naming rule's. As Trident's
// NASQtreeStorageDriver.GetInternalVolumeName (ontap_nas_qtree.go), a
// rendered name over ONTAP's 64 characters for a qtree is not refused: the
// naming rule names the volume instead, and Trident logs an error (here a
// warning). The name is the volume's internalName in its context.
func (n *nasEconomyDriver) newQtreeName(ctx context.Context, req *backends.CreateRequest) (string, error) {
	name, ok, err := n.templateName(ctx, req)
	switch {
	case err != nil:
		return "", err
	case ok && len(name) > maxQtreeName:
		logrus.WithContext(ctx).WithFields(logrus.Fields{"volume": req.Name, "rendered": name, "qtree": n.qtreeName(req.Name)}).
			Warn("nameTemplate renders a qtree name over ONTAP's 64 characters; using the naming rule, as Trident does")
	case ok:
		return name, nil
	}
	return n.qtreeName(req.Name), nil
}

// sameSize refuses a finished qtree whose quota is not the request's size.
func (n *nasEconomyDriver) sameSize(ctx context.Context, req *backends.CreateRequest, q *rest.Qtree) error {
	rules, err := n.quotaRules(ctx, q.Volume, q.Name)
	if err != nil {
		return n.failure(err, "reading the quota of qtree %s", q.Name)
	}
	if len(rules) > 0 && rules[0].HardLimit > 0 && rules[0].HardLimit != req.SizeBytes {
		return backends.Errorf(backends.ErrAlreadyExists, "qtree %s, named by nameTemplate %q, holds %d bytes, not the %d asked for: another volume's",
			q.Name, n.poolDefaults(req.Pool).NameTemplate.String(), rules[0].HardLimit, req.SizeBytes)
	}
	return nil
}

// newQtreePolicy is the export policy a new qtree starts with: the empty
// policy with autoExportPolicy (no node mounts it until published to it),
// else the configured or requested one.
func (n *nasEconomyDriver) newQtreePolicy(ctx context.Context, s *settings, o backends.VolumeOptions) (string, error) {
	if !n.autoPolicy(o) {
		return s.ExportPolicy, nil
	}
	return emptyPolicyName(n.cfg.StoragePrefix), n.ensureEmptyPolicy(ctx)
}

// createIn makes the qtree and its quota in the reserved pool. again is
// true when another pool should be tried: the pool went away before the
// qtree was made in it (deleted by another controller), or another
// controller filled it at the same time. Once the qtree exists, a failure
// is returned instead: the retried create finds the qtree and completes it.
func (n *nasEconomyDriver) createIn(ctx context.Context, r *poolReservation, req *backends.CreateRequest, c rest.QtreeCreate) (*backends.Volume, bool, error) {
	defer r.release()
	ctx, cancel := detach(ctx)
	defer cancel()
	pool := r.p.vol
	c.Volume = pool.Name
	err := n.eco.prepared(ctx, r.p)
	if err == nil {
		err = n.eco.ensureSize(ctx, r.p)
	}
	var q *rest.Qtree
	var cerr error
	if err == nil {
		// A failed create may have been made all the same (its answer
		// lost), and an abandoned attempt may have made it elsewhere.
		cerr = n.client.CreateQtree(ctx, c)
		q, err = n.madeOnce(ctx, c.Name)
		switch {
		case err != nil:
		case q == nil && cerr != nil:
			err = n.createFailure(cerr, "creating qtree %s in %s", c.Name, pool.Name)
		case q == nil:
			err = backends.Errorf(backends.ErrUnavailable, "qtree %s was gone right after its create; retry", c.Name)
		}
	}
	if err != nil {
		if n.poolGone(ctx, pool.Name) {
			n.eco.markFull(r.p)
			return nil, true, nil
		}
		return nil, false, err
	}
	if cerr != nil || q.Volume != pool.Name {
		// Not this create's qtree: an earlier attempt's, to complete.
		r.release()
		v, err := n.complete(ctx, req, q)
		return v, false, err
	}
	if err := n.setQuota(ctx, &pool, c.Name, req.SizeBytes, nil); err != nil {
		return nil, false, err
	}
	over, err := n.eco.check(ctx, r)
	if err != nil {
		return nil, false, err
	}
	if over {
		return nil, true, n.backOut(ctx, &pool, c.Name)
	}
	r.commit()
	return n.toVolume(req.Name, q, &rest.QuotaRule{Volume: pool.Name, VolumeUUID: pool.UUID, Qtree: c.Name, HardLimit: req.SizeBytes}), false, nil
}

// madeOnce finds a qtree just made, nil if there is none: once, after
// deleting the copies an abandoned attempt of the same create made in other
// pools (docs/design/economy.md §4.6).
func (n *nasEconomyDriver) madeOnce(ctx context.Context, name string) (*rest.Qtree, error) {
	qs, err := n.client.ListQtrees(ctx, n.eco.prefix+"*", name)
	if err != nil {
		return nil, n.failure(err, "looking up qtree %s", name)
	}
	if len(qs) == 0 {
		return nil, nil
	}
	keep, drop := keepFirstPool(qs, func(q *rest.Qtree) string { return q.Volume })
	for _, q := range drop {
		logrus.WithContext(ctx).WithFields(logrus.Fields{"qtree": name, "flexvol": q.Volume, "kept": keep.Volume}).
			Warn("an earlier attempt made the qtree in another pool too: deleting that copy")
		if err := n.client.DeleteQtree(ctx, q.VolumeUUID, q.ID); err != nil && !rest.IsNotFound(err) {
			return nil, n.failure(err, "deleting copy of qtree %s in %s", name, q.Volume)
		}
	}
	return keep, nil
}

// poolGone reports whether a pool FlexVol is no longer there under its
// name (deleted or being deleted by another controller).
func (n *nasEconomyDriver) poolGone(ctx context.Context, name string) bool {
	_, err := n.client.GetVolume(ctx, name)
	return rest.IsNotFound(err)
}

// backOut deletes a qtree this create made in a pool that turned out
// over its limit.
func (n *nasEconomyDriver) backOut(ctx context.Context, pool *rest.Volume, name string) error {
	vol, err := rest.Literal(pool.Name)
	if err != nil {
		return err
	}
	qs, err := n.client.ListQtrees(ctx, vol, name)
	if err != nil {
		return n.failure(err, "finding qtree %s to move it out of full FlexVol %s", name, pool.Name)
	}
	for _, q := range qs {
		if err := n.client.DeleteQtree(ctx, q.VolumeUUID, q.ID); err != nil && !rest.IsNotFound(err) {
			return n.failure(err, "moving qtree %s out of full FlexVol %s", name, pool.Name)
		}
	}
	return nil
}

// complete finishes a qtree an earlier attempt made: its quota, and the
// room for it in its pool.
func (n *nasEconomyDriver) complete(ctx context.Context, req *backends.CreateRequest, q *rest.Qtree) (*backends.Volume, error) {
	rules, err := n.quotaRules(ctx, q.Volume, q.Name)
	if err != nil {
		return nil, n.failure(err, "reading the quota of qtree %s", q.Name)
	}
	if len(rules) > 0 && rules[0].HardLimit > 0 {
		return n.toVolume(req.Name, q, &rules[0]), nil
	}
	var existing *rest.QuotaRule
	if len(rules) > 0 {
		existing = &rules[0]
	}
	if err := n.quotaInPool(ctx, q.Volume, q.Name, req.SizeBytes, req.SizeBytes, existing); err != nil {
		return nil, err
	}
	return n.toVolume(req.Name, q, &rest.QuotaRule{Volume: q.Volume, VolumeUUID: q.VolumeUUID, Qtree: q.Name, HardLimit: req.SizeBytes}), nil
}

// quotaInPool sets a qtree's hard limit to size once its pool has grown by
// grow bytes to hold it.
func (n *nasEconomyDriver) quotaInPool(ctx context.Context, poolName, qtree string, grow, size int64, existing *rest.QuotaRule) error {
	r, err := n.eco.reserveIn(ctx, poolName, grow)
	if err != nil {
		return err
	}
	defer r.release()
	if err := n.eco.ensureSize(ctx, r.p); err != nil {
		return err
	}
	pool := r.p.vol
	if err := n.setQuota(ctx, &pool, qtree, size, existing); err != nil {
		return err
	}
	r.commit()
	return nil
}

// setQuota gives a qtree its hard limit: a new rule, or a changed one.
// Where ONTAP saved the rule but could not put it in force (no derived
// quota to resize from, or a failed resize), quotas of the pool are turned
// off and on, as ONTAP's message asks (docs/design/economy.md §2).
func (n *nasEconomyDriver) setQuota(ctx context.Context, pool *rest.Volume, qtree string, size int64, existing *rest.QuotaRule) error {
	var err error
	if existing != nil {
		err = n.client.SetQuotaLimit(ctx, existing.UUID, size)
	} else {
		err = n.client.CreateQuotaRule(ctx, pool.Name, qtree, size)
		if rest.IsAlreadyExists(err) {
			var rules []rest.QuotaRule
			if rules, err = n.quotaRules(ctx, pool.Name, qtree); err == nil && len(rules) > 0 {
				err = n.client.SetQuotaLimit(ctx, rules[0].UUID, size)
			}
		}
	}
	if rest.IsQuotaNotInForce(err) {
		return n.reinitializeQuotas(ctx, pool)
	}
	if err != nil {
		return n.failure(err, "setting the quota of qtree %s to %d bytes", qtree, size)
	}
	return nil
}

// quotaRules lists the tree quota rules of qtree in the FlexVol named volume.
func (n *nasEconomyDriver) quotaRules(ctx context.Context, volume, qtree string) ([]rest.QuotaRule, error) {
	vol, err := rest.Literal(volume)
	if err != nil {
		return nil, err
	}
	return n.client.ListQuotaRules(ctx, vol, qtree)
}
