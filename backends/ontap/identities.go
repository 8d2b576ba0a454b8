package ontap

import (
	"context"
	"errors"
	"maps"
	"sync"
	"time"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/rest"
)

// The identity cache (docs/design/ontap-rest.md §10.1) sits in front of the
// lookup (VolumeAt, lookup in volumes.go), which stays as it is: uncached.
// It lets publish, unpublish and delete address a volume by the UUIDs an
// earlier call learnt, instead of reading the FlexVol (and the LUN) again.
//
// Rules:
//   - Filled by a create that learnt the UUIDs (ontap-san: the LUN's POST
//     echoes them) and by the controller after a lookup made for publish,
//     unpublish or delete (Remember).
//   - Forgotten by every uncached lookup of the volume: those precede the
//     calls that change it otherwise (expand, modify, snapshot, clone), and
//     the calls that must see ONTAP as it is now.
//   - Forgotten when a call on the volume fails, when it is deleted, and
//     after identityTTL.
//   - A call on a remembered volume that meets ONTAP's "not found" (an
//     error code, rest.ClassNotFound, never message text: the volume was
//     deleted or renamed by hand) forgets it, looks it up afresh and runs
//     once more.
//   - Only this process's memory holds it: a restarted controller looks
//     every volume up once.

// identityTTL bounds how long a remembered volume is trusted. Changes
// made by hand that no request of ours would notice (an export policy
// swapped on a volume, a rename seen only by uuid) are seen after it.
const identityTTL = 2 * time.Minute

// identity is a remembered volume: the backends.Volume a lookup (or the
// create) returned, its handle included.
type identity struct {
	vol  *backends.Volume
	name string // the FlexVol's name it was found at
	read time.Time
}

// identities is the cache of one backend, by volume ID.
type identities struct {
	mu sync.Mutex
	m  map[string]identity
}

// copyVolume returns a copy of v whose handle and context the caller may
// change: calls on one volume are serialized by the controller, but a
// remembered volume is shared between successive calls.
func copyVolume(v *backends.Volume) *backends.Volume {
	out := *v
	out.Context = maps.Clone(v.Context)
	if h := handleOf(v); h != nil {
		hc := *h
		if h.vol != nil {
			vc := *h.vol
			hc.vol = &vc
		}
		if h.lun != nil {
			lc := *h.lun
			hc.lun = &lc
		}
		out.Handle = &hc
	}
	return &out
}

// KnownVolume implements backends.IdentityCache. The volume it returns is
// marked cached: its calls check it against ONTAP's "not found".
func (d *driver) KnownVolume(id, internalName string) (*backends.Volume, bool) {
	if internalName == "" {
		internalName = d.volumeName(id)
	}
	d.ids.mu.Lock()
	defer d.ids.mu.Unlock()
	e, ok := d.ids.m[id]
	if !ok || e.name != internalName || now().Sub(e.read) >= identityTTL {
		return nil, false
	}
	v := copyVolume(e.vol)
	handleOf(v).cached = true
	return v, true
}

// Remember implements backends.IdentityCache.
func (d *driver) Remember(vol *backends.Volume) {
	h := handleOf(vol)
	if h == nil || h.vol == nil || h.vol.UUID == "" || vol.Incomplete || vol.Backend != d.Name() {
		return // nothing a call could address by UUID, or a half-made volume
	}
	v := copyVolume(vol)
	handleOf(v).cached = false
	d.ids.mu.Lock()
	defer d.ids.mu.Unlock()
	if d.ids.m == nil {
		d.ids.m = map[string]identity{}
	}
	d.ids.m[vol.ID] = identity{vol: v, name: h.vol.Name, read: now()}
}

// forget drops what is remembered of volume id.
func (d *driver) forget(id string) {
	d.ids.mu.Lock()
	defer d.ids.mu.Unlock()
	delete(d.ids.m, id)
}

// errStale is what a call on a remembered volume returns when what ONTAP
// answered suggests the volume moved without a "not found" (an ontap-san
// LUN path listing no map where the record has one): it is looked up again.
var errStale = errors.New("the remembered volume looks stale")

// onVolume runs call on vol (docs/design/ontap-rest.md §10.1): if vol was
// remembered and call met ONTAP's "not found" (or errStale), it forgets
// vol, looks it up afresh with locate and runs call once more on what it
// finds. A volume that is gone by then is locate's ErrNotFound. After a
// call that succeeded the volume is remembered as the call left it
// (keep), else forgotten.
func (d *driver) onVolume(ctx context.Context, vol *backends.Volume, keep bool,
	locate func(ctx context.Context, id, internalName string) (*backends.Volume, error),
	call func(*backends.Volume) error,
) error {
	err := call(vol)
	if h := handleOf(vol); err != nil && h != nil && h.cached && (errors.Is(err, backends.ErrNotFound) || errors.Is(err, errStale)) {
		d.forget(vol.ID)
		fresh, lerr := locate(ctx, vol.ID, vol.Context["internalName"])
		if lerr != nil {
			return lerr
		}
		vol = fresh
		err = call(vol)
	}
	if err != nil || !keep {
		d.forget(vol.ID)
		return err
	}
	d.Remember(vol)
	return nil
}

// onGone is onVolume for the calls for which a volume that is gone is
// done: unpublish and delete. When the fresh lookup after ONTAP's "not
// found" finds no volume, the call succeeds.
func (d *driver) onGone(ctx context.Context, vol *backends.Volume, keep bool,
	locate func(ctx context.Context, id, internalName string) (*backends.Volume, error),
	call func(*backends.Volume) error,
) error {
	gone := false
	err := d.onVolume(ctx, vol, keep, func(ctx context.Context, id, internalName string) (*backends.Volume, error) {
		v, err := locate(ctx, id, internalName)
		gone = errors.Is(err, backends.ErrNotFound)
		return v, err
	}, call)
	if gone {
		return nil
	}
	return err
}

// igroupTTL bounds how long a publish trusts that a per-node igroup exists
// with the node's IQN (docs/design/ontap-rest.md §10.2), as lifTTL does for
// the LIFs.
const igroupTTL = 30 * time.Second

// igroupCache remembers the per-node igroups this process found or made
// holding a node's IQN: name → UUID.
type igroupCache struct {
	mu sync.Mutex
	m  map[string]knownIgroup
}

type knownIgroup struct {
	uuid, iqn string
	read      time.Time
}

func (c *igroupCache) get(name, iqn string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k, ok := c.m[name]
	if !ok || (iqn != "" && k.iqn != iqn) || now().Sub(k.read) >= igroupTTL {
		return "", false
	}
	return k.uuid, true
}

func (c *igroupCache) put(name, uuid, iqn string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]knownIgroup{}
	}
	c.m[name] = knownIgroup{uuid: uuid, iqn: iqn, read: now()}
}

func (c *igroupCache) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, name)
}

// lunIDCache remembers, per LUN UUID and per-node igroup name, the LUN ID
// under which the node last reached the LUN, so that a map removed on
// ONTAP by hand is made again where the node's device still sits
// (docs/design/ontap-rest.md §10.4). Unlike the caches above it has no
// TTL: the node's device stays at its ID for as long as the volume is
// staged, however long that is. A node's entry goes with its unpublish, a
// LUN's with its delete.
type lunIDCache struct {
	mu sync.Mutex
	m  map[lunIDKey]int
	// seeded: the SVM's maps were read once (seed), so a publish finds
	// the ID of a map removed before this process saw it published.
	seeded bool
}

type lunIDKey struct{ lun, igroup string }

func (c *lunIDCache) get(lunUUID, igroup string) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id, ok := c.m[lunIDKey{lunUUID, igroup}]
	return id, ok
}

func (c *lunIDCache) put(lunUUID, igroup string, id int) {
	if lunUUID == "" || igroup == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[lunIDKey]int{}
	}
	c.m[lunIDKey{lunUUID, igroup}] = id
}

// forget drops the LUN's entry for igroup, or all its entries if igroup
// is "".
func (c *lunIDCache) forget(lunUUID, igroup string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.m {
		if k.lun == lunUUID && (igroup == "" || k.igroup == igroup) {
			delete(c.m, k)
		}
	}
}

// seed adds the ID of every map of the SVM through a per-node igroup:
// this installation's, then Trident's ("<node>-<uuid>": the same node's
// map when Trident did not truncate the node name), which a publish
// re-makes through ours. An entry the process has already is kept: it
// came from a map made or seen since the listing was asked for.
func (c *lunIDCache) seed(maps []rest.LUNMap, installationID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[lunIDKey]int{}
	}
	for _, theirs := range []bool{false, true} {
		for _, m := range maps {
			var k lunIDKey
			node, id, ok := cutNodeIgroup(m.IgroupName)
			switch {
			case m.LUNUUID == "" || !ok:
				continue
			case !theirs && id == installationID:
				k = lunIDKey{m.LUNUUID, m.IgroupName}
			case theirs && id != installationID:
				k = lunIDKey{m.LUNUUID, igroupName(node, installationID)}
			default:
				continue
			}
			if _, known := c.m[k]; !known {
				c.m[k] = m.LUNID
			}
		}
	}
	c.seeded = true
}

func (c *lunIDCache) isSeeded() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seeded
}

// cutNodeIgroup splits a per-node igroup name "<node>-<uuid>" (ours or
// Trident's).
func cutNodeIgroup(name string) (node, id string, ok bool) {
	const n = 36 // a UUID
	if len(name) < n+2 || name[len(name)-n-1] != '-' || !wholeUUIDRE.MatchString(name[len(name)-n:]) {
		return "", "", false
	}
	return name[:len(name)-n-1], name[len(name)-n:], true
}
