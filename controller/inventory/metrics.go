package inventory

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"
)

// Trident's series (core/metrics/metrics.go), with its names, help texts
// and labels, and ontap-csi's volume info series, which joins a PV and its
// claim to the ONTAP volume and SVM (Trident #486): its volume and svm
// labels are the ones ONTAP's own exporters (Harvest) use, and
// persistentvolume, persistentvolumeclaim, namespace and storageclass are
// kube-state-metrics'.
var (
	backendInfoDesc = prometheus.NewDesc("trident_backend_info", "Trident backend information",
		[]string{"backend_type", "backend_name", "backend_uuid"}, nil)
	backendCountDesc = prometheus.NewDesc("trident_backend_count", "The total number of backends",
		[]string{"backend_type", "backend_state"}, nil)
	volumeCountDesc = prometheus.NewDesc("trident_volume_count", "The total number of volumes",
		[]string{"backend_type", "backend_uuid", "volume_state", "volume_type"}, nil)
	volumeAllocatedDesc = prometheus.NewDesc("trident_volume_allocated_bytes", "The total allocated number of bytes grouped by backends and volumes",
		[]string{"backend_type", "backend_uuid", "volume_state", "volume_type"}, nil)
	volumeTotalDesc   = prometheus.NewDesc("trident_volume_total_bytes", "The total number of bytes in all volumes", nil, nil)
	snapshotCountDesc = prometheus.NewDesc("trident_snapshot_count", "The total number of snapshots",
		[]string{"backend_type", "backend_uuid"}, nil)
	snapshotAllocatedDesc = prometheus.NewDesc("trident_snapshot_allocated_bytes", "The allocated number of snapshot bytes in all backends",
		[]string{"backend_type", "backend_uuid"}, nil)
	nodeCountDesc         = prometheus.NewDesc("trident_node_count", "The total number of nodes", nil, nil)
	storageClassCountDesc = prometheus.NewDesc("trident_storageclass_count", "The total number of storage classes", nil, nil)
	volumeInfoDesc        = prometheus.NewDesc("ontap_csi_volume_info",
		"A volume's PersistentVolume and claim and its ONTAP volume and SVM; always 1.",
		[]string{"persistentvolume", "persistentvolumeclaim", "namespace", "storageclass", "backend_name", "backend_uuid", "svm", "volume"}, nil)
	refreshedDesc = prometheus.NewDesc("ontap_csi_inventory_refresh_timestamp_seconds",
		"When the backends' volumes and snapshots were last listed for these metrics.", nil, nil)
)

// Trident's volume state of a volume that exists on its backend.
const volumeOnline = "online"

// Describe implements prometheus.Collector.
func (inv *Inventory) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{backendInfoDesc, backendCountDesc, volumeCountDesc, volumeAllocatedDesc, volumeTotalDesc,
		snapshotCountDesc, snapshotAllocatedDesc, nodeCountDesc, storageClassCountDesc, volumeInfoDesc, refreshedDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector from the cache alone.
func (inv *Inventory) Collect(ch chan<- prometheus.Metric) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	names := make([]string, 0, len(inv.entries))
	for n := range inv.entries {
		names = append(names, n)
	}
	sort.Strings(names)
	inv.collectBackends(ch, names)
	owners := inv.owners(names)
	inv.collectVolumes(ch, owners)
	inv.collectSnapshots(ch, names, owners)
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	if inv.nodeCount != nil {
		gauge(nodeCountDesc, float64(*inv.nodeCount))
	}
	if inv.scCount != nil {
		gauge(storageClassCountDesc, float64(*inv.scCount))
	}
	if !inv.refreshed.IsZero() {
		gauge(refreshedDesc, float64(inv.refreshed.UnixNano())/1e9)
	}
}

func (inv *Inventory) collectBackends(ch chan<- prometheus.Metric, names []string) {
	type typeState struct{ driver, state string }
	counts := map[typeState]int{}
	for _, n := range names {
		st := inv.entries[n].status
		ch <- prometheus.MustNewConstMetric(backendInfoDesc, prometheus.GaugeValue, 1, st.Driver, st.Name, st.UUID)
		counts[typeState{st.Driver, string(st.State)}]++
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(backendCountDesc, prometheus.GaugeValue, float64(n), k.driver, k.state)
	}
}

// owned is a volume with the backend it is counted under.
type owned struct {
	volume
	e *entry
}

// owners counts each volume once: under the backend recorded as its
// creator, else the first (by name) that lists it, as the controller
// serves it.
func (inv *Inventory) owners(names []string) map[string]owned {
	out := map[string]owned{}
	for _, n := range names {
		e := inv.entries[n]
		for _, v := range e.volumes {
			if cur, ok := out[v.id]; !ok || v.owner == n && cur.owner != cur.e.status.Name {
				out[v.id] = owned{v, e}
			}
		}
	}
	return out
}

func (inv *Inventory) collectVolumes(ch chan<- prometheus.Metric, owners map[string]owned) {
	type group struct{ driver, uuid, volumeType string }
	counts, bytes := map[group]int{}, map[group]int64{}
	var total int64
	for _, o := range owners {
		st := o.e.status
		g := group{st.Driver, st.UUID, o.volumeType}
		counts[g]++
		bytes[g] += o.sizeBytes
		total += o.sizeBytes
		pv, ok := inv.pvs[o.id]
		if !ok {
			pv.Name = o.id // the provisioner names a PV after its volume
		}
		ch <- prometheus.MustNewConstMetric(volumeInfoDesc, prometheus.GaugeValue, 1,
			pv.Name, pv.Claim, pv.Namespace, pv.StorageClass, st.Name, st.UUID, st.SVM, o.internalName)
	}
	for g, n := range counts {
		ch <- prometheus.MustNewConstMetric(volumeCountDesc, prometheus.GaugeValue, float64(n), g.driver, g.uuid, volumeOnline, g.volumeType)
		ch <- prometheus.MustNewConstMetric(volumeAllocatedDesc, prometheus.GaugeValue, float64(bytes[g]), g.driver, g.uuid, volumeOnline, g.volumeType)
	}
	ch <- prometheus.MustNewConstMetric(volumeTotalDesc, prometheus.GaugeValue, float64(total))
}

// collectSnapshots counts each snapshot under its volume's backend; as in
// Trident, a backend without snapshots has no series.
func (inv *Inventory) collectSnapshots(ch chan<- prometheus.Metric, names []string, owners map[string]owned) {
	counts, bytes := map[*entry]int{}, map[*entry]int64{}
	for _, n := range names {
		e := inv.entries[n]
		for _, s := range e.snapshots {
			if o, ok := owners[s.volumeID]; ok && o.e == e {
				counts[e]++
				bytes[e] += s.sizeBytes
			}
		}
	}
	for e, n := range counts {
		st := e.status
		ch <- prometheus.MustNewConstMetric(snapshotCountDesc, prometheus.GaugeValue, float64(n), st.Driver, st.UUID)
		ch <- prometheus.MustNewConstMetric(snapshotAllocatedDesc, prometheus.GaugeValue, float64(bytes[e]), st.Driver, st.UUID)
	}
}
