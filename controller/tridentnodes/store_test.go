package tridentnodes

import (
	"context"
	"errors"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/ontap-csi/ontap-csi/controller"
	"github.com/ontap-csi/ontap-csi/nodeinfo"
)

const ns = "trident"

func newFakeClient(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{GVR: "TridentNodeList"}, objs...)
}

// tridentWritten is a TridentNode as Trident 20.10 left it: raw nodePrep and
// hostInfo, no 26.06 fields, and its finalizer.
func tridentWritten() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "trident.netapp.io/v1", "kind": "TridentNode",
		"metadata": map[string]any{"name": "worker-2", "namespace": ns, "finalizers": []any{"trident.netapp.io"}},
		"name":     "worker-2",
		"iqn":      "iqn.1993-08.org.debian:01:w2",
		"ips":      []any{"10.0.0.2", "fd00::2"},
		"nodePrep": map[string]any{"enabled": true, "nfs": "Completed"},
		"hostInfo": map[string]any{"os": map[string]any{"distro": "ubuntu", "version": "20.04"}},
	}}
}

// newStore returns a store over a namespace holding the record Trident
// wrote (worker-2).
func newStore() (*Store, *dynamicfake.FakeDynamicClient) {
	client := newFakeClient(tridentWritten())
	return New(client, ns), client
}

// putWorker1 creates the record of node Worker_1 and returns its object.
func putWorker1(t *testing.T, s *Store, client *dynamicfake.FakeDynamicClient) *unstructured.Unstructured {
	t.Helper()
	ctx := context.Background()
	stored, err := s.Put(ctx, nodeinfo.TridentNode{Name: "Worker_1", IQN: "iqn.2020-01.io.example:w1", IPs: []string{"10.0.0.1"},
		TopologyLabels: map[string]string{"topology.kubernetes.io/zone": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if stored.PublicationState != "clean" {
		t.Errorf("new node publication state = %q, want clean", stored.PublicationState)
	}
	obj, err := client.Resource(GVR).Namespace(ns).Get(ctx, "worker-1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("TridentNode not named as Trident names it (worker-1): %v", err)
	}
	return obj
}

// A record Trident wrote is a node the controller knows.
func TestReadsTridentsRecord(t *testing.T) {
	s, _ := newStore()
	info, err := s.Node(context.Background(), "worker-2")
	if err != nil {
		t.Fatal(err)
	}
	if info.IQN != "iqn.1993-08.org.debian:01:w2" || !slices.Equal(info.IPs, []string{"10.0.0.2", "fd00::2"}) {
		t.Fatalf("Node(worker-2) = %+v", info)
	}
}

// Create: Trident's object name, fields at the top level, finalizer.
func TestPutCreates(t *testing.T) {
	s, client := newStore()
	obj := putWorker1(t, s, client)
	if obj.Object["name"] != "Worker_1" || obj.Object["iqn"] != "iqn.2020-01.io.example:w1" {
		t.Errorf("stored object = %v", obj.Object)
	}
	if _, ok := obj.Object["topologyLabels"]; ok {
		t.Error("topology labels were stored; Trident never stores them")
	}
	if !slices.Equal(obj.GetFinalizers(), []string{Finalizer}) {
		t.Errorf("finalizers = %v", obj.GetFinalizers())
	}
}

// Update: new addresses, the publication state Trident set is kept, an
// unknown (newer Trident) field survives, a field now empty goes.
func TestPutUpdates(t *testing.T) {
	ctx := context.Background()
	s, client := newStore()
	obj := putWorker1(t, s, client)
	obj.Object["publicationState"] = "dirty"
	obj.Object["futureField"] = "kept"
	if _, err := client.Resource(GVR).Namespace(ns).Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	stored, err := s.Put(ctx, nodeinfo.TridentNode{Name: "Worker_1", IPs: []string{"10.0.0.9"}, PublicationState: "clean"})
	if err != nil {
		t.Fatal(err)
	}
	if stored.PublicationState != "dirty" || stored.IQN != "" || !slices.Equal(stored.IPs, []string{"10.0.0.9"}) {
		t.Errorf("after update: %+v", stored)
	}
	obj, _ = client.Resource(GVR).Namespace(ns).Get(ctx, "worker-1", metav1.GetOptions{})
	if obj.Object["futureField"] != "kept" {
		t.Error("an unknown field was dropped on update")
	}
	if _, ok := obj.Object["iqn"]; ok {
		t.Error("an emptied field was kept")
	}
}

// Another node whose name maps to the same object is not this one.
func TestPutKeepsAnotherNodesObject(t *testing.T) {
	ctx := context.Background()
	s, client := newStore()
	putWorker1(t, s, client)
	if _, err := s.Put(ctx, nodeinfo.TridentNode{Name: "worker-1"}); err == nil {
		t.Error("Put of worker-1 overwrote Worker_1's record")
	}
	if _, err := s.Get(ctx, "worker-1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(worker-1) = %v, want not found", err)
	}
}

func TestList(t *testing.T) {
	s, client := newStore()
	putWorker1(t, s, client)
	nodes, err := s.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 2 || nodes[0].Name != "Worker_1" || nodes[1].Name != "worker-2" {
		t.Errorf("List = %+v", nodes)
	}
}

// Delete takes the finalizer off, then deletes.
func TestDelete(t *testing.T) {
	ctx := context.Background()
	s, client := newStore()
	if err := s.Delete(ctx, "worker-2"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Node(ctx, "worker-2"); !errors.Is(err, controller.ErrNodeNotFound) {
		t.Errorf("Node after delete = %v, want ErrNodeNotFound", err)
	}
	if err := s.Delete(ctx, "worker-2"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second delete = %v, want not found", err)
	}
	var deleted bool
	for _, a := range client.Actions() {
		if a.GetVerb() == "update" && a.GetResource() == GVR {
			if u, ok := a.(interface{ GetObject() runtime.Object }); ok {
				if o, ok := u.GetObject().(*unstructured.Unstructured); ok && o.GetName() == "worker-2" && len(o.GetFinalizers()) == 0 {
					deleted = true
				}
			}
		}
	}
	if !deleted {
		t.Error("the finalizer was not removed before the delete")
	}
}

func TestObjectName(t *testing.T) {
	for in, want := range map[string]string{
		"worker-1":            "worker-1",
		"Worker_1":            "worker-1",
		"node.example.com":    "node.example.com",
		"ip-10-0-0-1:ec2":     "ip-10-0-0-1-ec2",
		"ÜberNode":            "-bernode",
		"UPPER.lower-09_a b/": "upper.lower-09-a-b-",
	} {
		if got := ObjectName(in); got != want {
			t.Errorf("ObjectName(%q) = %q, want %q", in, got, want)
		}
	}
}

// A TridentNode that does not parse does not lock its node out: the node's
// next report replaces its fields, and a publication state that still reads
// as one is kept.
func TestPutReplacesAnUnreadableRecord(t *testing.T) {
	ctx := context.Background()
	client := newFakeClient()
	s := New(client, ns)
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": GVR.GroupVersion().String(), "kind": "TridentNode",
		"metadata": map[string]any{"name": "worker-3", "namespace": ns},
		"name":     "worker-3", "ips": "not a list", "publicationState": "dirty",
	}}
	if _, err := client.Resource(GVR).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Node(ctx, "worker-3"); err == nil {
		t.Fatal("the malformed record read as a node")
	}
	stored, err := s.Put(ctx, nodeinfo.TridentNode{Name: "worker-3", IQN: "iqn.2020-01.io.example:w3", IPs: []string{"10.0.0.3"}})
	if err != nil {
		t.Fatalf("Put over an unreadable record: %v", err)
	}
	if !slices.Equal(stored.IPs, []string{"10.0.0.3"}) || stored.PublicationState != "dirty" {
		t.Errorf("stored %+v", stored)
	}
	if info, err := s.Node(ctx, "worker-3"); err != nil || info.IQN != "iqn.2020-01.io.example:w3" {
		t.Errorf("Node after the repair: %+v, %v", info, err)
	}
}
