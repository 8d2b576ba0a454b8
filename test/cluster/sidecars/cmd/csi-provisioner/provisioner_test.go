package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestSplitParameters(t *testing.T) {
	for _, tc := range []struct {
		name            string
		in              map[string]string
		params, secrets string
		err             bool
	}{
		{"driver's own", map[string]string{"backendType": "ontap-san"}, "map[backendType:ontap-san]", "map[]", false},
		{"fstype stays for the caller", map[string]string{prefix + "fstype": "xfs"}, "map[csi.storage.k8s.io/fstype:xfs]", "map[]", false},
		{"secrets apart", map[string]string{prefix + "provisioner-secret-name": "s", prefix + "node-stage-secret-namespace": "ns", "a": "b"},
			"map[a:b]", "map[node-stage-secret-namespace:ns provisioner-secret-name:s]", false},
		{"unknown secret kind", map[string]string{prefix + "bogus-secret-name": "s"}, "", "", true},
		{"unknown key of ours", map[string]string{prefix + "pvc/name": "x"}, "", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			params, secrets, err := splitParameters(tc.in)
			if (err != nil) != tc.err {
				t.Fatalf("error %v, want error %v", err, tc.err)
			}
			if err == nil && (fmt.Sprint(params) != tc.params || fmt.Sprint(secrets) != tc.secrets) {
				t.Errorf("params %v secrets %v, want %s %s", params, secrets, tc.params, tc.secrets)
			}
		})
	}
}

func TestSecretRefs(t *testing.T) {
	pvc := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "app"}}
	refs := secretRefs(map[string]string{
		"provisioner-secret-name": "${pvc.name}-creds", "provisioner-secret-namespace": "${pvc.namespace}",
		"node-stage-secret-name": "for-${pv.name}", "node-stage-secret-namespace": "storage",
	}, "pvc-1", pvc)
	if got := fmt.Sprint(*refs[provisionerSecret]); got != "{data-creds app}" {
		t.Errorf("provisioner secret %s", got)
	}
	if got := fmt.Sprint(*refs[nodeStageSecret]); got != "{for-pvc-1 storage}" {
		t.Errorf("node-stage secret %s", got)
	}
	if len(refs) != 2 {
		t.Errorf("refs %v, want two", refs)
	}
}

func TestAccessMode(t *testing.T) {
	for _, tc := range []struct {
		mode  v1.PersistentVolumeAccessMode
		multi bool
		want  csi.VolumeCapability_AccessMode_Mode
	}{
		{v1.ReadWriteOnce, false, csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		{v1.ReadWriteOnce, true, csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER},
		{v1.ReadWriteOncePod, false, csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		{v1.ReadWriteOncePod, true, csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER},
		{v1.ReadOnlyMany, false, csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY},
		{v1.ReadWriteMany, false, csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
	} {
		p := &provisioner{caps: map[csi.ControllerServiceCapability_RPC_Type]bool{csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER: tc.multi}}
		if got := p.accessMode(tc.mode); got != tc.want {
			t.Errorf("%s (multi-writer %v): %s, want %s", tc.mode, tc.multi, got, tc.want)
		}
	}
}

// TestRequirements: csi-provisioner's topology without --strict-topology.
func TestRequirements(t *testing.T) {
	const zone = "topology.kubernetes.io/zone"
	node := func(name, z string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{zone: z}}}
	}
	csiNode := func(name string, keys ...string) *storagev1.CSINode {
		return &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: "d", NodeID: name, TopologyKeys: keys}}}}
	}
	client := fake.NewSimpleClientset(node("n1", "a"), node("n2", "b"), node("n3", "c"),
		csiNode("n1", zone), csiNode("n2", zone), csiNode("n3"))
	p := &provisioner{driver: "d", client: client}
	for _, tc := range []struct {
		name                 string
		sc                   *storagev1.StorageClass
		selected             *v1.Node
		requisite, preferred string
	}{
		{"delayed: every zone, selected first", &storagev1.StorageClass{}, node("n2", "b"),
			"[map[topology.kubernetes.io/zone:a] map[topology.kubernetes.io/zone:b]]",
			"[map[topology.kubernetes.io/zone:b] map[topology.kubernetes.io/zone:a]]"},
		{"allowedTopologies win", &storagev1.StorageClass{AllowedTopologies: []v1.TopologySelectorTerm{{
			MatchLabelExpressions: []v1.TopologySelectorLabelRequirement{{Key: zone, Values: []string{"b"}}}}}}, node("n2", "b"),
			"[map[topology.kubernetes.io/zone:b]]", "[map[topology.kubernetes.io/zone:b]]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := p.requirements(context.Background(), tc.sc, tc.selected, "claim")
			if err != nil {
				t.Fatal(err)
			}
			if got := segments(req.GetRequisite()); got != tc.requisite {
				t.Errorf("requisite %s, want %s", got, tc.requisite)
			}
			if got := segments(req.GetPreferred()); got != tc.preferred {
				t.Errorf("preferred %s, want %s", got, tc.preferred)
			}
		})
	}
	if _, err := p.requirements(context.Background(), &storagev1.StorageClass{}, node("n9", "z"), "claim"); err == nil {
		t.Error("a selected node without a CSINode gave requirements")
	}
}

func segments(ts []*csi.Topology) string {
	var out []map[string]string
	for _, t := range ts {
		out = append(out, t.GetSegments())
	}
	return fmt.Sprint(out)
}

func TestNodeAffinity(t *testing.T) {
	if nodeAffinity(nil) != nil {
		t.Error("no topology gave an affinity")
	}
	a := nodeAffinity([]*csi.Topology{{Segments: map[string]string{"z": "a"}}, {Segments: map[string]string{"z": "b"}}})
	terms := a.Required.NodeSelectorTerms
	if len(terms) != 2 || terms[1].MatchExpressions[0].Values[0] != "b" || terms[0].MatchExpressions[0].Operator != v1.NodeSelectorOpIn {
		t.Errorf("affinity %+v", a)
	}
}
