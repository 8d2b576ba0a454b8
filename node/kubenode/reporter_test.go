package kubenode

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/nodeinfo"
)

func nodeObject(name string, annotations map[string]any) *unstructured.Unstructured {
	meta := map[string]any{"name": name, "labels": map[string]any{"kubernetes.io/hostname": name}}
	if annotations != nil {
		meta["annotations"] = annotations
	}
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": meta}}
}

func newFake(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{nodeinfo.NodesGVR: "NodeList"}, objs...)
}

// verbs lists the client's calls as "verb resource".
func verbs(c *dynamicfake.FakeDynamicClient) []string {
	var out []string
	for _, a := range c.Actions() {
		out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
	}
	return out
}

const (
	iqn1 = "iqn.1993-08.org.debian:01:w1"
	iqn2 = "iqn.1993-08.org.debian:01:w1-new"
)

func infoJSON(t *testing.T, n backends.Node) string {
	t.Helper()
	value, err := nodeinfo.Annotation(n)
	if err != nil {
		t.Fatal(err)
	}
	return value
}

// stored reads the annotation of a Node.
func stored(t *testing.T, obj *unstructured.Unstructured) backends.Node {
	t.Helper()
	value := obj.GetAnnotations()[nodeinfo.AnnotationKey]
	n, err := nodeinfo.ParseAnnotation(value)
	if err != nil {
		t.Fatalf("annotation %q: %v", value, err)
	}
	return n
}

func TestReportNode(t *testing.T) {
	report := backends.Node{Name: "worker-1", IQN: iqn1, IPs: []string{"10.0.0.1", "fd00::1"}}
	current := backends.Node{Name: "worker-1", IQN: iqn1, IPs: []string{"10.0.0.1", "fd00::1"}}
	for _, tc := range []struct {
		name       string
		existing   map[string]any // the Node's annotations before
		report     backends.Node
		wantVerbs  []string
		wantStored backends.Node
	}{{
		name:       "first report on a Node without annotations",
		report:     report,
		wantVerbs:  []string{"get nodes", "patch nodes"},
		wantStored: current,
	}, {
		name:       "first report beside other annotations",
		existing:   map[string]any{"node.alpha.kubernetes.io/ttl": "0"},
		report:     report,
		wantVerbs:  []string{"get nodes", "patch nodes"},
		wantStored: current,
	}, {
		name:       "unchanged: nothing written",
		existing:   map[string]any{nodeinfo.AnnotationKey: infoJSON(t, current)},
		report:     report,
		wantVerbs:  []string{"get nodes"},
		wantStored: current,
	}, {
		name:       "new IQN replaces the old info",
		existing:   map[string]any{nodeinfo.AnnotationKey: infoJSON(t, current)},
		report:     backends.Node{Name: "worker-1", IQN: iqn2, IPs: []string{"10.0.0.1", "fd00::1"}},
		wantVerbs:  []string{"get nodes", "patch nodes"},
		wantStored: backends.Node{Name: "worker-1", IQN: iqn2, IPs: []string{"10.0.0.1", "fd00::1"}},
	}, {
		name:       "an address gone",
		existing:   map[string]any{nodeinfo.AnnotationKey: infoJSON(t, current)},
		report:     backends.Node{Name: "worker-1", IQN: iqn1, IPs: []string{"10.0.0.1"}},
		wantVerbs:  []string{"get nodes", "patch nodes"},
		wantStored: backends.Node{Name: "worker-1", IQN: iqn1, IPs: []string{"10.0.0.1"}},
	}, {
		name:       "no iSCSI initiator any more",
		existing:   map[string]any{nodeinfo.AnnotationKey: infoJSON(t, current)},
		report:     backends.Node{Name: "worker-1", IPs: []string{"10.0.0.1", "fd00::1"}},
		wantVerbs:  []string{"get nodes", "patch nodes"},
		wantStored: backends.Node{Name: "worker-1", IPs: []string{"10.0.0.1", "fd00::1"}},
	}, {
		name:       "a corrupt annotation is overwritten",
		existing:   map[string]any{nodeinfo.AnnotationKey: `{"name":"worker-1","iqn":`},
		report:     report,
		wantVerbs:  []string{"get nodes", "patch nodes"},
		wantStored: current,
	}, {
		name:       "another node's info is overwritten",
		existing:   map[string]any{nodeinfo.AnnotationKey: infoJSON(t, backends.Node{Name: "worker-9", IQN: iqn1, IPs: []string{"10.0.0.1", "fd00::1"}})},
		report:     report,
		wantVerbs:  []string{"get nodes", "patch nodes"},
		wantStored: current,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			client := newFake(nodeObject("worker-1", tc.existing), nodeObject("worker-2", nil))
			if err := New(client).ReportNode(ctx, tc.report); err != nil {
				t.Fatal(err)
			}
			if got := verbs(client); !slices.Equal(got, tc.wantVerbs) {
				t.Errorf("calls = %v, want %v", got, tc.wantVerbs)
			}
			for _, a := range client.Actions() {
				if p, ok := a.(k8stesting.PatchAction); ok && p.GetPatchType() != types.MergePatchType {
					t.Errorf("patch type %s, want a merge patch (touches only our key)", p.GetPatchType())
				}
			}
			obj, err := client.Resource(nodeinfo.NodesGVR).Get(ctx, "worker-1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ann := obj.GetAnnotations()
			if got := stored(t, obj); !equal(got, tc.wantStored) {
				t.Errorf("stored %+v, want %+v", got, tc.wantStored)
			}
			for k, v := range tc.existing {
				if k != nodeinfo.AnnotationKey && ann[k] != v {
					t.Errorf("annotation %s = %q, was %q: the patch must leave other annotations alone", k, ann[k], v)
				}
			}
			if obj.GetLabels()["kubernetes.io/hostname"] != "worker-1" {
				t.Errorf("labels changed: %v", obj.GetLabels())
			}
			other, err := client.Resource(nodeinfo.NodesGVR).Get(ctx, "worker-2", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := other.GetAnnotations()[nodeinfo.AnnotationKey]; ok {
				t.Error("another node's Node was annotated")
			}
		})
	}
}

// TestReportNodeSequence is the node service's use: reports with what it
// discovers, a later one only writing when the info changed.
func TestReportNodeSequence(t *testing.T) {
	ctx := context.Background()
	client := newFake(nodeObject("worker-1", nil))
	r := New(client)
	for i, step := range []struct {
		info    backends.Node
		patches int // total so far
	}{
		{backends.Node{Name: "worker-1", IPs: []string{"10.0.0.1"}}, 1},
		{backends.Node{Name: "worker-1", IPs: []string{"10.0.0.1"}}, 1},
		{backends.Node{Name: "worker-1", IQN: iqn1, IPs: []string{"10.0.0.1"}}, 2},
		{backends.Node{Name: "worker-1", IQN: iqn1, IPs: []string{"10.0.0.1"}}, 2},
	} {
		if err := r.ReportNode(ctx, step.info); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		patches := 0
		for _, v := range verbs(client) {
			if v == "patch nodes" {
				patches++
			}
		}
		if patches != step.patches {
			t.Errorf("step %d: %d patches so far, want %d", i, patches, step.patches)
		}
		obj, _ := client.Resource(nodeinfo.NodesGVR).Get(ctx, "worker-1", metav1.GetOptions{})
		if got := stored(t, obj); got.IQN != step.info.IQN || !slices.Equal(got.IPs, step.info.IPs) {
			t.Errorf("step %d: stored %+v, want %+v", i, got, step.info)
		}
	}
}

func TestReportNodeFailures(t *testing.T) {
	forbidden := func(verb string) k8stesting.ReactionFunc {
		return func(a k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "worker-1",
				errors.New(`User "system:serviceaccount:ontap-csi:ontap-csi-node" cannot `+verb+` resource "nodes"`))
		}
	}
	for _, tc := range []struct {
		name    string
		info    backends.Node
		react   map[string]k8stesting.ReactionFunc // verb → reaction
		wantErr []string
		noPatch bool
	}{{
		name:    "no Node of that name",
		info:    backends.Node{Name: "not-a-node", IQN: iqn1},
		wantErr: []string{`Node "not-a-node" does not exist`, "--csi_node_name"},
		noPatch: true,
	}, {
		name:    "empty node name",
		info:    backends.Node{IQN: iqn1},
		wantErr: []string{"node name is empty"},
		noPatch: true,
	}, {
		name:    "get forbidden",
		info:    backends.Node{Name: "worker-1", IQN: iqn1},
		react:   map[string]k8stesting.ReactionFunc{"get": forbidden("get")},
		wantErr: []string{"reading Node worker-1", "forbidden"},
		noPatch: true,
	}, {
		name:    "patch forbidden (RBAC without patch on nodes)",
		info:    backends.Node{Name: "worker-1", IQN: iqn1},
		react:   map[string]k8stesting.ReactionFunc{"patch": forbidden("patch")},
		wantErr: []string{"annotating Node worker-1 with " + nodeinfo.AnnotationKey, "cannot patch"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			client := newFake(nodeObject("worker-1", nil))
			for verb, react := range tc.react {
				client.PrependReactor(verb, "nodes", react)
			}
			err := New(client).ReportNode(context.Background(), tc.info)
			if err == nil {
				t.Fatal("no error")
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if tc.noPatch && slices.Contains(verbs(client), "patch nodes") {
				t.Error("patched anyway")
			}
		})
	}
}
