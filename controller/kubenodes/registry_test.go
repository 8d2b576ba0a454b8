package kubenodes

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/controller"
	"github.com/ontap-csi/ontap-csi/nodeinfo"
)

func nodeObject(name string, annotations map[string]any) *unstructured.Unstructured {
	meta := map[string]any{"name": name}
	if annotations != nil {
		meta["annotations"] = annotations
	}
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": meta}}
}

func newFake(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{nodeinfo.NodesGVR: "NodeList"}, objs...)
}

func gets(c *dynamicfake.FakeDynamicClient) int {
	n := 0
	for _, a := range c.Actions() {
		if a.GetVerb() == "get" && a.GetResource() == nodeinfo.NodesGVR {
			n++
		}
	}
	return n
}

func TestNode(t *testing.T) {
	const w1 = `{"name":"worker-1","iqn":"iqn.1993-08.org.debian:01:w1","ips":["10.0.0.1","fd00::1"]}`
	for _, tc := range []struct {
		name     string
		nodes    []runtime.Object
		nodeID   string
		want     *backends.Node
		wantErr  []string // substrings; the error wraps ErrNodeNotFound
		notFound bool
	}{{
		name:   "reported",
		nodes:  []runtime.Object{nodeObject("worker-1", map[string]any{nodeinfo.AnnotationKey: w1}), nodeObject("worker-2", nil)},
		nodeID: "worker-1",
		want:   &backends.Node{Name: "worker-1", IQN: "iqn.1993-08.org.debian:01:w1", IPs: []string{"10.0.0.1", "fd00::1"}},
	}, {
		name:   "NFS-only node: no IQN",
		nodes:  []runtime.Object{nodeObject("worker-1", map[string]any{nodeinfo.AnnotationKey: `{"name":"worker-1","ips":["10.0.0.1"]}`})},
		nodeID: "worker-1",
		want:   &backends.Node{Name: "worker-1", IPs: []string{"10.0.0.1"}},
	}, {
		name:   "fields of a newer node plugin are ignored",
		nodes:  []runtime.Object{nodeObject("worker-1", map[string]any{nodeinfo.AnnotationKey: `{"name":"worker-1","iqn":"iqn.x:1","nqn":"nqn.x:1","ips":["10.0.0.1"]}`})},
		nodeID: "worker-1",
		want:   &backends.Node{Name: "worker-1", IQN: "iqn.x:1", IPs: []string{"10.0.0.1"}},
	}, {
		name:     "no such Node",
		nodes:    []runtime.Object{nodeObject("worker-1", map[string]any{nodeinfo.AnnotationKey: w1})},
		nodeID:   "worker-9",
		wantErr:  []string{`node "worker-9"`, "no Kubernetes Node", "node plugin has not reported"},
		notFound: true,
	}, {
		name:     "Node without annotations",
		nodes:    []runtime.Object{nodeObject("worker-2", nil)},
		nodeID:   "worker-2",
		wantErr:  []string{`node "worker-2"`, "has no " + nodeinfo.AnnotationKey + " annotation", "node plugin has not reported"},
		notFound: true,
	}, {
		name:     "Node with other annotations only",
		nodes:    []runtime.Object{nodeObject("worker-2", map[string]any{"node.alpha.kubernetes.io/ttl": "0"})},
		nodeID:   "worker-2",
		wantErr:  []string{`node "worker-2"`, "has no " + nodeinfo.AnnotationKey + " annotation"},
		notFound: true,
	}, {
		name:     "corrupt annotation",
		nodes:    []runtime.Object{nodeObject("worker-1", map[string]any{nodeinfo.AnnotationKey: `{"name":"worker-1","iqn":`})},
		nodeID:   "worker-1",
		wantErr:  []string{`node "worker-1"`, "annotation is not node info", "node plugin has not reported"},
		notFound: true,
	}, {
		name:     "annotation of the wrong type",
		nodes:    []runtime.Object{nodeObject("worker-1", map[string]any{nodeinfo.AnnotationKey: `{"name":"worker-1","ips":"10.0.0.1"}`})},
		nodeID:   "worker-1",
		wantErr:  []string{`node "worker-1"`, "annotation is not node info"},
		notFound: true,
	}, {
		name:     "annotation copied from another node",
		nodes:    []runtime.Object{nodeObject("worker-2", map[string]any{nodeinfo.AnnotationKey: w1})},
		nodeID:   "worker-2",
		wantErr:  []string{`node "worker-2"`, `names node "worker-1"`},
		notFound: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := New(newFake(tc.nodes...), 0)
			got, err := r.Node(context.Background(), tc.nodeID)
			if tc.want != nil {
				if err != nil {
					t.Fatal(err)
				}
				if got.Name != tc.want.Name || got.IQN != tc.want.IQN || !slices.Equal(got.IPs, tc.want.IPs) {
					t.Fatalf("Node(%s) = %+v, want %+v", tc.nodeID, got, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("Node(%s) = %+v, want an error", tc.nodeID, got)
			}
			if is := errors.Is(err, controller.ErrNodeNotFound); is != tc.notFound {
				t.Errorf("error %q: wraps ErrNodeNotFound = %v, want %v", err, is, tc.notFound)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

// An API failure is not "not found": ControllerUnpublishVolume would
// otherwise unpublish by name only, and publish must retry, not give up.
func TestNodeAPIError(t *testing.T) {
	client := newFake(nodeObject("worker-1", nil))
	client.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "worker-1",
			errors.New(`User "system:serviceaccount:ontap-csi:ontap-csi-controller" cannot get resource "nodes"`))
	})
	_, err := New(client, 0).Node(context.Background(), "worker-1")
	if err == nil || errors.Is(err, controller.ErrNodeNotFound) || !strings.Contains(err.Error(), "cannot get resource") {
		t.Fatalf("error = %v, want the API's forbidden error, not ErrNodeNotFound", err)
	}
}

// cacheEnv is a registry with a 5 s cache over a fake API, on a clock the
// test moves.
type cacheEnv struct {
	t      *testing.T
	client *dynamicfake.FakeDynamicClient
	r      *Registry
	now    time.Time
}

func newCacheEnv(t *testing.T) *cacheEnv {
	e := &cacheEnv{t: t, client: newFake(nodeObject("worker-2", nil)), now: time.Unix(1000, 0)}
	e.r = New(e.client, 5*time.Second)
	e.r.now = func() time.Time { return e.now }
	return e
}

// report sets a node's annotation, creating the Node if need be.
func (e *cacheEnv) report(name, value string) {
	e.t.Helper()
	ctx := context.Background()
	nodes := e.client.Resource(nodeinfo.NodesGVR)
	obj, err := nodes.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if _, err := nodes.Create(ctx, nodeObject(name, map[string]any{nodeinfo.AnnotationKey: value}), metav1.CreateOptions{}); err != nil {
			e.t.Fatal(err)
		}
		return
	}
	if err != nil {
		e.t.Fatal(err)
	}
	obj.SetAnnotations(map[string]string{nodeinfo.AnnotationKey: value})
	if _, err := nodes.Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// lookup asks the registry, counting GETs from here (gets).
func (e *cacheEnv) lookup(name string) (*backends.Node, error) {
	e.client.ClearActions()
	return e.r.Node(context.Background(), name)
}

const (
	worker1Old = `{"name":"worker-1","iqn":"iqn.x:old","ips":["10.0.0.1"]}`
	worker1New = `{"name":"worker-1","iqn":"iqn.x:new","ips":["10.0.0.1"]}`
)

// A missing node is not cached: it is found as soon as it reports. A found
// one is reused within the TTL, each caller with its own copy, and read
// again after it.
func TestNodeCache(t *testing.T) {
	e := newCacheEnv(t)
	if _, err := e.lookup("worker-1"); !errors.Is(err, controller.ErrNodeNotFound) {
		t.Fatalf("before the node reported: %v", err)
	}
	e.report("worker-1", worker1Old)
	n, err := e.lookup("worker-1")
	if err != nil || n.IQN != "iqn.x:old" || gets(e.client) != 1 {
		t.Fatalf("after reporting: %+v, %v, %d GETs", n, err, gets(e.client))
	}

	n.IPs[0] = "changed by the caller"
	e.report("worker-1", worker1New)
	e.now = e.now.Add(4 * time.Second)
	n, err = e.lookup("worker-1")
	if err != nil || n.IQN != "iqn.x:old" || n.IPs[0] != "10.0.0.1" || gets(e.client) != 0 {
		t.Fatalf("within the TTL: %+v, %v, %d GETs", n, err, gets(e.client))
	}

	e.now = e.now.Add(2 * time.Second)
	n, err = e.lookup("worker-1")
	if err != nil || n.IQN != "iqn.x:new" || gets(e.client) != 1 {
		t.Fatalf("after the TTL: %+v, %v, %d GETs", n, err, gets(e.client))
	}
}

// Expired entries are swept: a node that left does not stay.
func TestNodeCacheSweep(t *testing.T) {
	e := newCacheEnv(t)
	e.report("worker-1", worker1Old)
	if _, err := e.lookup("worker-1"); err != nil {
		t.Fatal(err)
	}
	if err := e.client.Resource(nodeinfo.NodesGVR).Delete(context.Background(), "worker-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.now = e.now.Add(time.Minute)
	e.report("worker-2", `{"name":"worker-2","ips":["10.0.0.2"]}`)
	if _, err := e.lookup("worker-2"); err != nil {
		t.Fatal(err)
	}
	e.r.mu.Lock()
	_, stale := e.r.cache["worker-1"]
	e.r.mu.Unlock()
	if stale {
		t.Error("an expired entry survived the sweep")
	}
	if _, err := e.lookup("worker-1"); !errors.Is(err, controller.ErrNodeNotFound) {
		t.Errorf("deleted node: %v", err)
	}
}

// A negative TTL turns the cache off.
func TestNodeCacheOff(t *testing.T) {
	e := newCacheEnv(t)
	e.report("worker-2", `{"name":"worker-2","ips":["10.0.0.2"]}`)
	r := New(e.client, -1)
	for range 2 {
		if _, err := r.Node(context.Background(), "worker-2"); err != nil {
			t.Fatal(err)
		}
	}
	if len(r.cache) != 0 {
		t.Errorf("cache off, but %d entries", len(r.cache))
	}
}
