package controller

import (
	"context"
	"hash/fnv"
	"slices"
	"sort"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/ontap-csi/ontap-csi/backends"
)

// placement is a pool a new volume may go to.
type placement struct {
	backend backends.Backend
	pool    backends.Pool
	// topologies is what the volume will be accessible from; nil means
	// everywhere.
	topologies []map[string]string
	// preference ranks by the CO's preferred topologies: lower first.
	preference int
}

// placements returns the pools that satisfy the parameters, the use and the
// topology requirement, best first. The order among equals rotates with
// name, so volumes spread over pools while a retried create of one name
// keeps choosing the same pool.
func (s *Service) placements(ctx context.Context, p *parameters, use *volumeUse, topo *csi.TopologyRequirement, name string) ([]placement, error) {
	bs, incomplete := s.backendSet()
	if len(bs) == 0 {
		if incomplete != nil {
			return nil, incomplete
		}
		return nil, unconfigured("no backend is configured: start the controller with --backend-config, or create a TridentBackendConfig")
	}
	var matched, out []placement
	for _, b := range bs {
		if p.backendType != "" && b.Driver() != p.backendType || p.protocol != "" && b.Protocol() != p.protocol {
			continue
		}
		if use != nil && use.supportedBy(b.Protocol()) != nil {
			continue
		}
		pools, err := b.Pools(ctx)
		if err != nil {
			return nil, backends.Named(b.Name(), err)
		}
		for _, pool := range pools {
			if p.poolAllowed(b.Name(), pool) {
				matched = append(matched, placement{backend: b, pool: pool})
			}
		}
	}
	if len(matched) == 0 {
		if p.iops {
			return nil, invalidArg("no backend pool matches the StorageClass parameters: IOPS selects pools that offer an IOPS range, " +
				"which ONTAP pools do not (in Trident neither); set a QoS policy with qosPolicy instead")
		}
		return nil, invalidArg("no backend pool matches the StorageClass parameters and volume capabilities")
	}
	requisite, preferred := topologySegments(topo)
	for _, pl := range matched {
		if len(requisite) > 0 && pl.pool.Topologies != nil {
			pl.topologies = intersectTopologies(pl.pool.Topologies, requisite)
			if len(pl.topologies) == 0 {
				continue
			}
		} else {
			pl.topologies = pl.pool.Topologies
		}
		pl.preference = preferenceOf(pl.topologies, preferred)
		out = append(out, pl)
	}
	if len(out) == 0 {
		return nil, exhausted("no backend pool is accessible from the requisite topology")
	}
	rotate(out, name)
	sort.SliceStable(out, func(i, j int) bool { return out[i].preference < out[j].preference })
	return out, nil
}

// poolAllowed applies storagePools, additionalStoragePools,
// excludeStoragePools and the attribute requests, as Trident's storage
// class matching does.
func (p *parameters) poolAllowed(backend string, pool backends.Pool) bool {
	if p.excludePools.matches(backend, pool.Name) {
		return false
	}
	if p.additionalPools.matches(backend, pool.Name) {
		return true
	}
	if p.storagePools != nil && !p.storagePools.matches(backend, pool.Name) {
		return false
	}
	if p.selector != nil && !p.selector.Matches(labels.Set(pool.Labels)) {
		return false
	}
	if p.media != "" && pool.Media != "" && pool.Media != p.media {
		return false
	}
	if p.provisioningType != "" && !slices.Contains(pool.ProvisioningTypes, p.provisioningType) {
		return false
	}
	if p.region != "" && pool.Region != p.region || p.zone != "" && pool.Zone != p.zone {
		return false
	}
	if p.wantSnapshots && pool.NoSnapshots || p.wantClones && pool.NoClones {
		return false
	}
	return !p.iops
}

func topologySegments(t *csi.TopologyRequirement) (requisite, preferred []map[string]string) {
	for _, r := range t.GetRequisite() {
		requisite = append(requisite, r.GetSegments())
	}
	for _, r := range t.GetPreferred() {
		preferred = append(preferred, r.GetSegments())
	}
	// CSI: requisite may be empty while preferred is set; preferred
	// topologies are then also the acceptable ones.
	if len(requisite) == 0 {
		requisite = preferred
	}
	return requisite, preferred
}

// intersectTopologies keeps the pool topologies that some requisite
// topology satisfies: every segment of the pool's entry has the same value
// in the requisite one (Trident's rule).
func intersectTopologies(pool, requisite []map[string]string) []map[string]string {
	var out []map[string]string
	for _, t := range pool {
		for _, r := range requisite {
			if subset(t, r) {
				out = append(out, t)
				break
			}
		}
	}
	return out
}

func subset(small, big map[string]string) bool {
	for k, v := range small {
		if bv, ok := big[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

// preferenceOf is the index of the first preferred topology the placement
// serves; a placement accessible everywhere serves every one.
func preferenceOf(topologies, preferred []map[string]string) int {
	if topologies == nil {
		return 0
	}
	for i, pref := range preferred {
		for _, t := range topologies {
			if subset(t, pref) {
				return i
			}
		}
	}
	return len(preferred)
}

func rotate(pl []placement, name string) {
	if len(pl) < 2 {
		return
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	k := int(h.Sum32() % uint32(len(pl)))
	tmp := append(append([]placement(nil), pl[k:]...), pl[:k]...)
	copy(pl, tmp)
}

func csiTopologies(ts []map[string]string) []*csi.Topology {
	var out []*csi.Topology
	for _, t := range ts {
		out = append(out, &csi.Topology{Segments: t})
	}
	return out
}
