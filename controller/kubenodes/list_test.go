package kubenodes

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/ontap-csi/ontap-csi/nodeinfo"
)

// ListNodes returns the reported nodes only, as Node would accept them.
func TestListNodes(t *testing.T) {
	const (
		w1    = `{"name":"worker-1","iqn":"iqn.1993-08.org.debian:01:w1","ips":["10.0.0.1"]}`
		other = `{"name":"worker-1","iqn":"iqn.1993-08.org.debian:01:w1","ips":["10.0.0.1"]}`
	)
	c := newFake([]runtime.Object{
		nodeObject("worker-1", map[string]any{nodeinfo.AnnotationKey: w1}),
		nodeObject("worker-2", nil),                                           // not reported
		nodeObject("worker-3", map[string]any{nodeinfo.AnnotationKey: other}), // copied from worker-1
		nodeObject("worker-4", map[string]any{nodeinfo.AnnotationKey: "{"}),   // unreadable
	}...)
	nodes, err := New(c, 0).ListNodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(nodes); got != "[{worker-1 iqn.1993-08.org.debian:01:w1 [10.0.0.1]}]" {
		t.Errorf("ListNodes = %s", got)
	}
}
