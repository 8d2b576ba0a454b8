package tridentnodes

import (
	"context"
	"fmt"
	"testing"
)

// ListNodes names nodes as ControllerPublishVolume gets them (Worker_1,
// whose object is worker-1), with what a publish needs.
func TestListNodes(t *testing.T) {
	s, client := newStore()
	putWorker1(t, s, client)
	nodes, err := s.ListNodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(nodes[0]); len(nodes) != 2 || got != "{Worker_1 iqn.2020-01.io.example:w1 [10.0.0.1]}" || nodes[1].Name != "worker-2" {
		t.Errorf("ListNodes = %+v", nodes)
	}
}
