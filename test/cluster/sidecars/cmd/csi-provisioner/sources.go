package main

import (
	"context"
	"fmt"
	"hash/fnv"
	"sort"

	"github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const snapshotGroup = "snapshot.storage.k8s.io"

// contentSource is the claim's data source as CreateVolume takes it: a
// ready VolumeSnapshot of this driver, or a bound claim of the same
// StorageClass, in the claim's namespace, no larger than the claim.
func (p *provisioner) contentSource(ctx context.Context, pvc *v1.PersistentVolumeClaim, class string, size resource.Quantity) (*csi.VolumeContentSource, error) {
	ds := pvc.Spec.DataSourceRef
	if ds == nil {
		if pvc.Spec.DataSource == nil {
			return nil, nil
		}
		ds = &v1.TypedObjectReference{APIGroup: pvc.Spec.DataSource.APIGroup, Kind: pvc.Spec.DataSource.Kind, Name: pvc.Spec.DataSource.Name}
	}
	group := ""
	if ds.APIGroup != nil {
		group = *ds.APIGroup
	}
	switch {
	case group == snapshotGroup && ds.Kind == "VolumeSnapshot":
		return p.snapshotSource(ctx, pvc.Namespace, ds.Name, size)
	case group == "" && ds.Kind == "PersistentVolumeClaim":
		return p.cloneSource(ctx, pvc.Namespace, ds.Name, class, size)
	}
	return nil, fmt.Errorf("data source %s/%s %s is not supported", group, ds.Kind, ds.Name)
}

func (p *provisioner) snapshotSource(ctx context.Context, ns, name string, size resource.Quantity) (*csi.VolumeContentSource, error) {
	vs, err := p.snaps.SnapshotV1().VolumeSnapshots(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("VolumeSnapshot %s/%s: %w", ns, name, err)
	}
	st := vs.Status
	if st == nil || st.ReadyToUse == nil || !*st.ReadyToUse || st.BoundVolumeSnapshotContentName == nil {
		return nil, fmt.Errorf("VolumeSnapshot %s/%s is not ready to use", ns, name)
	}
	vsc, err := p.snaps.SnapshotV1().VolumeSnapshotContents().Get(ctx, *st.BoundVolumeSnapshotContentName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if vsc.Spec.Driver != p.driver || vsc.Status == nil || vsc.Status.SnapshotHandle == nil {
		return nil, fmt.Errorf("VolumeSnapshotContent %s is not a ready snapshot of %s", vsc.Name, p.driver)
	}
	if st.RestoreSize != nil && size.Cmp(*st.RestoreSize) < 0 {
		return nil, fmt.Errorf("the claim asks for %s, less than the snapshot's restore size %s", size.String(), st.RestoreSize.String())
	}
	return &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
		Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: *vsc.Status.SnapshotHandle},
	}}, nil
}

func (p *provisioner) cloneSource(ctx context.Context, ns, name, class string, size resource.Quantity) (*csi.VolumeContentSource, error) {
	src, err := p.client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("source claim %s/%s: %w", ns, name, err)
	}
	if src.Status.Phase != v1.ClaimBound || src.Spec.VolumeName == "" {
		return nil, fmt.Errorf("source claim %s/%s is not bound", ns, name)
	}
	if src.Spec.StorageClassName == nil || *src.Spec.StorageClassName != class {
		return nil, fmt.Errorf("source claim %s/%s is not of StorageClass %s", ns, name, class)
	}
	if have := src.Status.Capacity[v1.ResourceStorage]; size.Cmp(have) < 0 {
		return nil, fmt.Errorf("the claim asks for %s, less than the source's %s", size.String(), have.String())
	}
	pv, err := p.client.CoreV1().PersistentVolumes().Get(ctx, src.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != p.driver {
		return nil, fmt.Errorf("source volume %s is not a volume of %s", pv.Name, p.driver)
	}
	return &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{
		Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: pv.Spec.CSI.VolumeHandle},
	}}, nil
}

// requirements are the accessibility requirements csi-provisioner sends
// (without --strict-topology): requisite is the class's allowedTopologies,
// else every segment of the nodes whose driver reports the same topology
// keys; preferred is the requisite with the selected node's segment first
// (delayed binding), or rotated by the claim's name (immediate). Nil when
// the driver reports no topology keys.
func (p *provisioner) requirements(ctx context.Context, sc *storagev1.StorageClass, selected *v1.Node, claim string) (*csi.TopologyRequirement, error) {
	var keys []string
	if selected != nil {
		cn, err := p.client.StorageV1().CSINodes().Get(ctx, selected.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("CSINode %s: %w", selected.Name, err)
		}
		if keys = p.topologyKeys(cn); keys == nil {
			return nil, fmt.Errorf("the driver is not registered on the selected node %s", selected.Name)
		}
	}
	requisite, err := p.requisite(ctx, sc, keys)
	if err != nil || len(requisite) == 0 {
		return nil, err
	}
	first := -1
	if selected != nil {
		mine := segment(selected.Labels, keys)
		for i, t := range requisite {
			if equalSegments(t.Segments, mine) {
				first = i
			}
		}
	}
	if first < 0 {
		h := fnv.New32a()
		h.Write([]byte(claim))
		first = int(h.Sum32() % uint32(len(requisite)))
	}
	preferred := append(append([]*csi.Topology{}, requisite[first:]...), requisite[:first]...)
	return &csi.TopologyRequirement{Requisite: requisite, Preferred: preferred}, nil
}

func (p *provisioner) requisite(ctx context.Context, sc *storagev1.StorageClass, keys []string) ([]*csi.Topology, error) {
	var out []*csi.Topology
	for _, term := range sc.AllowedTopologies {
		seg := map[string]string{}
		for _, e := range term.MatchLabelExpressions {
			if len(e.Values) > 0 {
				seg[e.Key] = e.Values[0]
			}
		}
		out = append(out, &csi.Topology{Segments: seg})
	}
	if len(out) > 0 {
		return out, nil
	}
	nodes, err := p.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, n := range nodes.Items {
		cn, err := p.client.StorageV1().CSINodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			continue
		}
		nk := p.topologyKeys(cn)
		if len(nk) == 0 || (keys != nil && !sameKeys(nk, keys)) {
			continue
		}
		seg := segment(n.Labels, nk)
		if key := fmt.Sprint(seg); !seen[key] {
			seen[key] = true
			out = append(out, &csi.Topology{Segments: seg})
		}
	}
	sort.Slice(out, func(i, j int) bool { return fmt.Sprint(out[i].Segments) < fmt.Sprint(out[j].Segments) })
	return out, nil
}

// topologyKeys are the driver's keys in a CSINode; nil if it is not there.
func (p *provisioner) topologyKeys(cn *storagev1.CSINode) []string {
	for _, d := range cn.Spec.Drivers {
		if d.Name == p.driver {
			keys := append([]string{}, d.TopologyKeys...)
			sort.Strings(keys)
			if keys == nil {
				keys = []string{}
			}
			return keys
		}
	}
	return nil
}

func segment(labels map[string]string, keys []string) map[string]string {
	seg := map[string]string{}
	for _, k := range keys {
		seg[k] = labels[k]
	}
	return seg
}

func sameKeys(a, b []string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

func equalSegments(a, b map[string]string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

// nodeAffinity turns the volume's accessible topology into the PV's: one
// term per segment, any of which may hold.
func nodeAffinity(topologies []*csi.Topology) *v1.VolumeNodeAffinity {
	if len(topologies) == 0 {
		return nil
	}
	var terms []v1.NodeSelectorTerm
	for _, t := range topologies {
		var exprs []v1.NodeSelectorRequirement
		keys := make([]string, 0, len(t.GetSegments()))
		for k := range t.GetSegments() {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			exprs = append(exprs, v1.NodeSelectorRequirement{Key: k, Operator: v1.NodeSelectorOpIn, Values: []string{t.GetSegments()[k]}})
		}
		terms = append(terms, v1.NodeSelectorTerm{MatchExpressions: exprs})
	}
	return &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: terms}}
}
