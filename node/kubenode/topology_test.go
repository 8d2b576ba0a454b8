package kubenode

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/ontap-csi/ontap-csi/nodeinfo"
)

func labelledNode(name string, labels map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Node",
		"metadata": map[string]any{"name": name, "labels": labels}}}
}

var nodesResource = schema.GroupResource{Resource: "nodes"}

// failGets makes the first n GETs of nodes fail with err (n < 0: all).
func failGets(n int, err error) k8stesting.ReactionFunc {
	return func(k8stesting.Action) (bool, runtime.Object, error) {
		if n == 0 {
			return false, nil, nil
		}
		n--
		return true, nil, err
	}
}

func TestTopologyRead(t *testing.T) {
	unavailable := apierrors.NewServiceUnavailable("the API server is starting")
	for _, tc := range []struct {
		name     string
		labels   map[string]any
		node     string
		reactor  k8stesting.ReactionFunc
		want     map[string]string
		wantErr  string // substring; "" = success
		noAccess bool   // errors.Is(err, ErrNoNodeAccess)
		gets     int    // GETs made (reads are never cached: each is one); -1: retried, within the bound
	}{{
		name: "zone and region with Trident's prefix, other labels not",
		labels: map[string]any{"topology.kubernetes.io/zone": "z1", "topology.kubernetes.io/region": "r1",
			"kubernetes.io/hostname": "worker-1", "failure-domain.beta.kubernetes.io/zone": "old-z1"},
		want: map[string]string{"topology.kubernetes.io/zone": "z1", "topology.kubernetes.io/region": "r1"},
		gets: 1,
	}, {
		name:   "no topology labels: none reported",
		labels: map[string]any{"kubernetes.io/hostname": "worker-1", "topology.example.com/rack": "r7"},
		want:   nil,
		gets:   1,
	}, {
		name:    "the API server answers after two failures",
		labels:  map[string]any{"topology.kubernetes.io/zone": "z1"},
		reactor: failGets(2, unavailable),
		want:    map[string]string{"topology.kubernetes.io/zone": "z1"},
		gets:    3,
	}, {
		name:    "never answers: an error once the bound has passed",
		labels:  map[string]any{"topology.kubernetes.io/zone": "z1"},
		reactor: failGets(-1, unavailable),
		wantErr: "the API server is starting",
		gets:    -1, // at 0, 10 ms, 30 ms; the next (70 ms) is past the 60 ms bound
	}, {
		name:     "forbidden: no retry, ErrNoNodeAccess",
		labels:   map[string]any{"topology.kubernetes.io/zone": "z1"},
		reactor:  failGets(-1, apierrors.NewForbidden(nodesResource, "worker-1", errors.New("RBAC: no get on nodes"))),
		wantErr:  "may not get Nodes",
		noAccess: true,
		gets:     1,
	}, {
		name:    "no such Node: no retry",
		labels:  map[string]any{"topology.kubernetes.io/zone": "z1"},
		node:    "not-a-node",
		wantErr: `Node "not-a-node" does not exist`,
		gets:    1,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			client := newFake(labelledNode("worker-1", tc.labels))
			if tc.reactor != nil {
				client.PrependReactor("get", "nodes", tc.reactor)
			}
			r := NewTopology(client)
			r.Bound, r.Backoff = 60*time.Millisecond, 10*time.Millisecond
			node := tc.node
			if node == "" {
				node = "worker-1"
			}
			got, err := r.Read(context.Background(), node)
			if tc.wantErr == "" {
				if err != nil || !maps.Equal(got, tc.want) || (tc.want == nil) != (got == nil) {
					t.Fatalf("Read = %v, %v; want %v", got, err, tc.want)
				}
			} else if err == nil || !strings.Contains(err.Error(), tc.wantErr) || got != nil {
				t.Fatalf("Read = %v, %v; want an error with %q", got, err, tc.wantErr)
			}
			if errors.Is(err, ErrNoNodeAccess) != tc.noAccess {
				t.Errorf("errors.Is(%v, ErrNoNodeAccess) = %v, want %v", err, !tc.noAccess, tc.noAccess)
			}
			g := verbs(client)
			for _, v := range g {
				if v != "get nodes" {
					t.Errorf("API call %q; only get nodes is granted for this", v)
				}
			}
			if tc.gets >= 0 && len(g) != tc.gets {
				t.Errorf("%d GETs of the Node, want %d", len(g), tc.gets)
			}
			if tc.gets < 0 && (len(g) < 2 || len(g) > 3) {
				t.Errorf("%d GETs of the Node, want 2 or 3 (retried with backoff until the bound)", len(g))
			}
		})
	}
}

// Two starts against the same Node labels read the same topology; a start
// after a relabel reads the new labels.
func TestTopologyReadIsAFunctionOfTheLabels(t *testing.T) {
	client := newFake(labelledNode("worker-1", map[string]any{
		"topology.kubernetes.io/zone": "z1", "topology.kubernetes.io/region": "r1", "kubernetes.io/hostname": "worker-1",
	}))
	first, err := NewTopology(client).Read(context.Background(), "worker-1")
	if err != nil {
		t.Fatal(err)
	}
	second, err := NewTopology(client).Read(context.Background(), "worker-1")
	if err != nil || !maps.Equal(first, second) || len(first) != 2 {
		t.Fatalf("first start %v, second start %v, %v; want the same two labels", first, second, err)
	}
	if _, err := client.Resource(nodeinfo.NodesGVR).Update(context.Background(), labelledNode("worker-1",
		map[string]any{"topology.kubernetes.io/zone": "z2"}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	third, err := NewTopology(client).Read(context.Background(), "worker-1")
	if err != nil || third["topology.kubernetes.io/zone"] != "z2" || len(third) != 1 {
		t.Fatalf("after the relabel: %v, %v", third, err)
	}
}

func TestTopologyReadStopsWithTheContext(t *testing.T) {
	client := newFake(labelledNode("worker-1", nil))
	client.PrependReactor("get", "nodes", failGets(-1, apierrors.NewServiceUnavailable("down")))
	r := NewTopology(client)
	r.Bound, r.Backoff = time.Minute, 50*time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := r.Read(ctx, "worker-1")
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("Read = %v after %s; want the context's deadline, at once", err, time.Since(start))
	}
}
