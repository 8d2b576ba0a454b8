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

// PublishedNodes makes the fake a PublicationLister: what it has
// published, limited to the nodes the controller passes (the backend can
// only name nodes it is told of).
func (f *fakeBackend) PublishedNodes(_ context.Context, vols []*backends.Volume, nodes []backends.Node) (map[string][]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failWith != nil {
		return nil, f.failWith
	}
	f.listings++
	var ids []string
	out := map[string][]string{}
	for _, v := range vols {
		ids = append(ids, v.ID)
		names := []string{}
		for _, n := range nodes {
			if slices.Contains(f.published[v.ID], n.Name) {
				names = append(names, n.Name)
			}
		}
		out[v.ID] = names
	}
	f.listedFor = append(f.listedFor, ids)
	return out, nil
}

// noListRegistry is a NodeRegistry that cannot list.
type noListRegistry struct{}

func (noListRegistry) Node(_ context.Context, id string) (*backends.Node, error) {
	return nil, fmt.Errorf("%s: %w", id, ErrNodeNotFound)
}

// failingLister lists with an error (the Kubernetes API did not answer).
type failingLister struct{ noListRegistry }

func (failingLister) ListNodes(context.Context) ([]backends.Node, error) {
	return nil, errors.New("apiserver: connection refused")
}

func TestListVolumesPublishedNodes(t *testing.T) {
	type page struct {
		max  int32
		want map[string][]string // volume ID -> published node IDs
	}
	for _, tc := range []struct {
		name      string
		nodes     NodeRegistry // nil: node-1 and node-2 registered
		published map[string][]string
		pages     []page
		// calls: PublishedNodes calls per backend, nas then san
		calls    [2]int
		wantCode codes.Code
	}{
		{
			name:      "one page, both backends, each asked once",
			published: map[string][]string{"a": {"node-1"}, "b": {"node-1", "node-2"}, "s": {"node-2"}},
			pages:     []page{{0, map[string][]string{"a": {"node-1"}, "b": {"node-1", "node-2"}, "c": {}, "s": {"node-2"}}}},
			calls:     [2]int{1, 1},
		},
		{
			name:      "pages: each backend asked about the page's volumes only",
			published: map[string][]string{"c": {"node-2"}},
			pages: []page{
				{2, map[string][]string{"a": {}, "b": {}}},
				{2, map[string][]string{"c": {"node-2"}, "s": {}}},
			},
			calls: [2]int{2, 1},
		},
		{
			name:      "a node the registry does not know is not reported",
			published: map[string][]string{"a": {"node-1", "gone"}},
			pages:     []page{{0, map[string][]string{"a": {"node-1"}, "b": {}, "c": {}, "s": {}}}},
			calls:     [2]int{1, 1},
		},
		{
			name:      "a registry that cannot list: published nowhere",
			nodes:     noListRegistry{},
			published: map[string][]string{"a": {"node-1"}},
			pages:     []page{{0, map[string][]string{"a": {}, "b": {}, "c": {}, "s": {}}}},
			calls:     [2]int{1, 1},
		},
		{
			name:     "a registry that fails: Unavailable",
			nodes:    failingLister{},
			pages:    []page{{0, nil}},
			wantCode: codes.Unavailable,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nas := newFake("nas1", "ontap-nas", backends.ProtocolFile)
			san := newFake("san1", "ontap-san", backends.ProtocolBlock)
			reg := tc.nodes
			if reg == nil {
				n := NewNodes()
				n.Set(backends.Node{Name: "node-1", IPs: []string{"10.0.0.1"}})
				n.Set(backends.Node{Name: "node-2", IPs: []string{"10.0.0.2"}})
				reg = n
			}
			s, err := New(Config{Backends: []backends.Backend{nas, san}, Nodes: reg})
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{"a", "b", "c"} {
				nas.vols[id] = &backends.Volume{ID: id}
			}
			san.vols["s"] = &backends.Volume{ID: "s"}
			for id, ns := range tc.published {
				if _, ok := nas.vols[id]; ok {
					nas.published[id] = ns
				} else {
					san.published[id] = ns
				}
			}
			tok := ""
			for i, p := range tc.pages {
				resp, err := s.ListVolumes(context.Background(), &csi.ListVolumesRequest{MaxEntries: p.max, StartingToken: tok})
				if tc.wantCode != codes.OK {
					if code(err) != tc.wantCode {
						t.Fatalf("page %d: %v, want %v", i, err, tc.wantCode)
					}
					return
				}
				if err != nil {
					t.Fatalf("page %d: %v", i, err)
				}
				got := map[string][]string{}
				for _, e := range resp.Entries {
					if e.Status == nil {
						t.Fatalf("page %d: %s has no status", i, e.Volume.VolumeId)
					}
					got[e.Volume.VolumeId] = append([]string{}, e.Status.PublishedNodeIds...)
				}
				if fmt.Sprint(got) != fmt.Sprint(p.want) {
					t.Errorf("page %d: published %v, want %v", i, got, p.want)
				}
				tok = resp.NextToken
			}
			if tok != "" {
				t.Errorf("pages left after the last: token %q", tok)
			}
			if got := [2]int{nas.listings, san.listings}; got != tc.calls {
				t.Errorf("PublishedNodes calls (nas, san) = %v, want %v; asked about %v, %v", got, tc.calls, nas.listedFor, san.listedFor)
			}
		})
	}
}

// A backend's failure to list fails the page, naming the backend, with the
// backend's kind.
func TestListVolumesPublishedNodesFailure(t *testing.T) {
	s, nas, _ := newService(t)
	nas.vols["a"] = &backends.Volume{ID: "a"}
	nas.failWith = backends.Errorf(backends.ErrUnavailable, "cannot reach SVM")
	_, err := s.ListVolumes(context.Background(), &csi.ListVolumesRequest{})
	if code(err) != codes.Unavailable {
		t.Fatalf("ListVolumes with a failing backend: %v, want Unavailable", err)
	}
}

// listingRecords is fakeRecords that can list.
type listingRecords struct {
	fakeRecords
	listErr error
}

func (l *listingRecords) ListRecords(context.Context) (map[string]VolumeRecord, error) {
	return l.recs, l.listErr
}

// A volume under a name of its own (a nameTemplate's, an import) is listed
// through its records, with the nodes it is published to; without records
// that list, it is not listed (and external-attacher would publish it again
// on every reconcile).
func TestListVolumesNamedByRecords(t *testing.T) {
	for _, tc := range []struct {
		name     string
		records  VolumeRecords
		want     map[string][]string
		wantCode codes.Code
	}{
		{name: "records listed", records: &listingRecords{fakeRecords: fakeRecords{recs: map[string]VolumeRecord{
			"pvc-own": {InternalName: "apps_data"}, "pvc-gone": {InternalName: "was_here"}, "a": {InternalName: "a_elsewhere"},
		}}}, want: map[string][]string{"a": {"node-1"}, "pvc-own": {"node-2"}}},
		{name: "records that cannot list", records: &fakeRecords{recs: map[string]VolumeRecord{"pvc-own": {InternalName: "apps_data"}}},
			want: map[string][]string{"a": {"node-1"}}},
		{name: "records unreadable: Unavailable", records: &listingRecords{listErr: errors.New("connection refused")},
			wantCode: codes.Unavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nas := newFake("nas1", "ontap-nas", backends.ProtocolFile)
			n := NewNodes()
			n.Set(backends.Node{Name: "node-1", IPs: []string{"10.0.0.1"}})
			n.Set(backends.Node{Name: "node-2", IPs: []string{"10.0.0.2"}})
			s, err := New(Config{Backends: []backends.Backend{nas}, Nodes: n, Records: tc.records})
			if err != nil {
				t.Fatal(err)
			}
			nas.vols["a"] = &backends.Volume{ID: "a"}
			nas.vols["pvc-own"] = &backends.Volume{ID: "pvc-own", Context: map[string]string{fakeOwnName: "apps_data"}}
			nas.published["a"] = []string{"node-1"}
			nas.published["pvc-own"] = []string{"node-2"}
			resp, err := s.ListVolumes(context.Background(), &csi.ListVolumesRequest{})
			if code(err) != tc.wantCode {
				t.Fatalf("ListVolumes: %v, want %v", err, tc.wantCode)
			}
			if err != nil {
				return
			}
			got := map[string][]string{}
			for _, e := range resp.Entries {
				got[e.Volume.VolumeId] = e.Status.PublishedNodeIds
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("listed %v, want %v", got, tc.want)
			}
		})
	}
}
