package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/ontap-csi/ontap-csi/backends"
)

// fakeStates is a NodeStates of fixed answers; a node absent from states
// is ErrNodeNotFound, and err fails every read.
type fakeStates struct {
	states map[string]NodeState
	err    error
	reads  int
}

func (f *fakeStates) NodeState(_ context.Context, id string) (NodeState, error) {
	f.reads++
	if f.err != nil {
		return NodeState{}, f.err
	}
	st, ok := f.states[id]
	if !ok {
		return NodeState{}, fmt.Errorf("node %q: %w", id, ErrNodeNotFound)
	}
	return st, nil
}

// fencingBackend is a fakeBackend that fences: a fence takes the node off
// the volume's publications, as the ONTAP drivers' remove its access,
// unless notFenced is set, when it changes nothing and fails as a fence
// ONTAP did not confirm.
type fencingBackend struct {
	*fakeBackend
	notFenced bool
	fenceErr  error            // returned by Fence when set
	fences    []string         // node names fenced
	nodes     []*backends.Node // what each fence was told of the node
}

func (f *fencingBackend) Fence(_ context.Context, v *backends.Volume, nodeName string, node *backends.Node) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.notFenced {
		return nil, backends.Errorf(backends.ErrNotFenced, "node %s still reaches %s", nodeName, v.ID)
	}
	if f.fenceErr != nil {
		return nil, f.fenceErr
	}
	f.fences = append(f.fences, nodeName)
	f.nodes = append(f.nodes, node)
	var removed []string
	f.published[v.ID] = slices.DeleteFunc(f.published[v.ID], func(n string) bool {
		if n == nodeName {
			removed = append(removed, "access of "+n)
			return true
		}
		return false
	})
	return removed, nil
}

func TestDecideFence(t *testing.T) {
	apiDown := errors.New("connection refused")
	gone := fmt.Errorf("node %q: %w", "n", ErrNodeNotFound)
	for _, tc := range []struct {
		name        string
		st          NodeState
		err         error
		forceDetach bool
		fence       bool
		wantErr     bool
	}{
		{name: "Ready, no taint", st: NodeState{Ready: true}},
		{name: "NotReady, no taint, no flag", st: NodeState{}},
		{name: "taint, Ready", st: NodeState{OutOfService: true, Ready: true}, fence: true},
		{name: "taint, NotReady", st: NodeState{OutOfService: true}, fence: true},
		{name: "taint and flag", st: NodeState{OutOfService: true}, forceDetach: true, fence: true},
		{name: "flag, Ready", st: NodeState{Ready: true}, forceDetach: true},
		{name: "flag, NotReady", st: NodeState{}, forceDetach: true, fence: true},
		{name: "Node gone, no flag", err: gone},
		{name: "Node gone, flag", err: gone, forceDetach: true, fence: true},
		{name: "Node unreadable", err: apiDown, wantErr: true},
		{name: "Node unreadable, flag", err: apiDown, forceDetach: true, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := decideFence("n", tc.st, tc.err, tc.forceDetach)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				if codeOf(err) != codes.Unavailable || !errors.Is(err, apiDown) {
					t.Errorf("error %v: code %v, want Unavailable wrapping the API's error", err, codeOf(err))
				}
				return
			}
			if d.fence != tc.fence || (d.fence && d.reason == "") {
				t.Errorf("decision %+v, want fence %v with a reason", d, tc.fence)
			}
		})
	}
}

// ControllerUnpublishVolume fences when the decision says so, and reports
// the volume detached only once the backend confirmed the fence; every
// refusal leaves the volume's access as it was.
func TestUnpublishFences(t *testing.T) {
	const vol, node = "lun", "node-1"
	for _, tc := range []struct {
		name        string
		states      map[string]NodeState
		statesErr   error
		forceDetach bool
		notFencer   bool // the backend cannot fence
		notFenced   bool // the backend's fence is not confirmed
		failWith    error
		nodeID      string
		want        codes.Code
		fenced      bool
		detached    bool // node-1's publication is gone
		nodeInfo    bool // the fence was told the node's IQN
	}{
		{name: "no taint: a plain unpublish", states: map[string]NodeState{node: {Ready: true}}, want: codes.OK, detached: true},
		{name: "taint: fenced", states: map[string]NodeState{node: {OutOfService: true}}, want: codes.OK, fenced: true, detached: true, nodeInfo: true},
		{name: "force detach, Ready: a plain unpublish", states: map[string]NodeState{node: {Ready: true}}, forceDetach: true, want: codes.OK, detached: true},
		{name: "force detach, NotReady: fenced", states: map[string]NodeState{node: {}}, forceDetach: true, want: codes.OK, fenced: true, detached: true, nodeInfo: true},
		{name: "NotReady without the flag: a plain unpublish", states: map[string]NodeState{node: {}}, want: codes.OK, detached: true},
		{name: "Node gone, force detach: fenced", states: map[string]NodeState{}, forceDetach: true, want: codes.OK, fenced: true, detached: true, nodeInfo: true},
		{name: "Node lookup fails: nothing changes", statesErr: errors.New("apiserver down"), want: codes.Unavailable},
		{name: "Node lookup fails, force detach: nothing changes", statesErr: errors.New("apiserver down"), forceDetach: true, want: codes.Unavailable},
		{name: "fence not confirmed: nothing reported detached", states: map[string]NodeState{node: {OutOfService: true}}, notFenced: true, want: codes.Unavailable},
		// NotFound from a detach tells external-attacher "detached".
		{name: "fence fails NotFound: Unavailable", states: map[string]NodeState{node: {OutOfService: true}}, failWith: backends.Errorf(backends.ErrNotFound, "igroup gone"), want: codes.Unavailable},
		{name: "backend cannot fence: nothing changes", states: map[string]NodeState{node: {OutOfService: true}}, notFencer: true, want: codes.Unavailable},
		{name: "unregistered node with taint: fenced by name", states: map[string]NodeState{"node-7": {OutOfService: true}}, nodeID: "node-7", want: codes.OK, fenced: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := newFake("san1", "ontap-san", backends.ProtocolBlock)
			var b backends.Backend = fake
			fb := &fencingBackend{fakeBackend: fake, notFenced: tc.notFenced}
			if !tc.notFencer {
				b = fb
			}
			nodes := NewNodes()
			nodes.Set(backends.Node{Name: node, IQN: "iqn.2020-01.io.example:node-1", IPs: []string{"10.0.0.1"}})
			states := &fakeStates{states: tc.states, err: tc.statesErr}
			s, err := New(Config{Backends: []backends.Backend{b}, Nodes: nodes, NodeStates: states, ForceDetach: tc.forceDetach})
			if err != nil {
				t.Fatal(err)
			}
			nodeID := node
			if tc.nodeID != "" {
				nodeID = tc.nodeID
			}
			fake.vols[vol] = &backends.Volume{ID: vol}
			fake.published[vol] = []string{nodeID, "node-2"}
			fb.fenceErr = tc.failWith

			_, err = s.ControllerUnpublishVolume(context.Background(), &csi.ControllerUnpublishVolumeRequest{VolumeId: vol, NodeId: nodeID})
			if code(err) != tc.want {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if got := len(fb.fences) > 0; got != tc.fenced {
				t.Errorf("fenced %v, want %v", fb.fences, tc.fenced)
			}
			pub := fake.published[vol]
			if detached := !slices.Contains(pub, nodeID); detached != (tc.detached || tc.fenced) {
				t.Errorf("publications after the call %v (detached %v)", pub, detached)
			}
			if !slices.Contains(pub, "node-2") {
				t.Errorf("another node's access changed: %v", pub)
			}
			if tc.fenced && (fb.nodes[0] != nil) != tc.nodeInfo {
				t.Errorf("fence told of node %+v, want info %v", fb.nodes[0], tc.nodeInfo)
			}
			if tc.want != codes.OK {
				return
			}
			// Idempotent: the repeat finds nothing to remove and is OK.
			if _, err := s.ControllerUnpublishVolume(context.Background(), &csi.ControllerUnpublishVolumeRequest{VolumeId: vol, NodeId: nodeID}); err != nil {
				t.Errorf("repeat: %v", err)
			}
			if !slices.Equal(fake.published[vol], []string{"node-2"}) {
				t.Errorf("after the repeat: %v", fake.published[vol])
			}
		})
	}
}

// A detach from every node (no node ID) and a controller without Node
// states (allInOne, outside a cluster) never fence, and never read a Node.
func TestUnpublishWithoutFencing(t *testing.T) {
	fake := newFake("san1", "ontap-san", backends.ProtocolBlock)
	fb := &fencingBackend{fakeBackend: fake}
	states := &fakeStates{states: map[string]NodeState{"node-1": {OutOfService: true}}}
	s, err := New(Config{Backends: []backends.Backend{fb}, Nodes: NewNodes(), NodeStates: states, ForceDetach: true})
	if err != nil {
		t.Fatal(err)
	}
	fake.vols["lun"] = &backends.Volume{ID: "lun"}
	if _, err := s.ControllerUnpublishVolume(context.Background(), &csi.ControllerUnpublishVolumeRequest{VolumeId: "lun"}); err != nil {
		t.Fatal(err)
	}
	if states.reads != 0 || len(fb.fences) != 0 {
		t.Errorf("no node ID: %d Node reads, fences %v", states.reads, fb.fences)
	}
	s2, err := New(Config{Backends: []backends.Backend{fb}, Nodes: NewNodes(), ForceDetach: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.ControllerUnpublishVolume(context.Background(), &csi.ControllerUnpublishVolumeRequest{VolumeId: "lun", NodeId: "node-1"}); err != nil || len(fb.fences) != 0 {
		t.Errorf("without NodeStates: %v, fences %v", err, fb.fences)
	}
}
