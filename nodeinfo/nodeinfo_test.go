package nodeinfo

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/ontap-csi/ontap-csi/backends"
)

// The annotation's bytes are what node plugins already wrote on Nodes and
// what controllers of every version read.
func TestAnnotation(t *testing.T) {
	for _, tc := range []struct {
		node backends.Node
		want string
	}{
		{backends.Node{Name: "worker-1", IQN: "iqn.1993-08.org.debian:01:w1", IPs: []string{"10.0.0.1", "fd00::1"}},
			`{"name":"worker-1","iqn":"iqn.1993-08.org.debian:01:w1","ips":["10.0.0.1","fd00::1"]}`},
		{backends.Node{Name: "worker-1", IPs: []string{"10.0.0.1"}}, `{"name":"worker-1","ips":["10.0.0.1"]}`},
		{backends.Node{Name: "worker-1", IPs: []string{}}, `{"name":"worker-1"}`},
	} {
		got, err := Annotation(tc.node)
		if err != nil || got != tc.want {
			t.Errorf("Annotation(%+v) = %s, %v; want %s", tc.node, got, err, tc.want)
		}
		back, err := ParseAnnotation(got)
		if err != nil || back.Name != tc.node.Name || back.IQN != tc.node.IQN || !slices.Equal(back.IPs, tc.node.IPs) {
			t.Errorf("ParseAnnotation(%s) = %+v, %v", got, back, err)
		}
	}
}

func TestParseAnnotation(t *testing.T) {
	for _, tc := range []struct {
		value   string
		want    backends.Node
		wantErr bool
	}{
		{value: `{"name":"worker-1","iqn":"iqn.x:1","nqn":"nqn.x:1","ips":["10.0.0.1"]}`, // a newer writer's field
			want: backends.Node{Name: "worker-1", IQN: "iqn.x:1", IPs: []string{"10.0.0.1"}}},
		{value: `{"name":"worker-1","iqn":`, wantErr: true},
		{value: `{"name":"worker-1","ips":"10.0.0.1"}`, wantErr: true},
		{value: ``, wantErr: true},
	} {
		got, err := ParseAnnotation(tc.value)
		if (err != nil) != tc.wantErr {
			t.Errorf("ParseAnnotation(%q) error = %v, want error %v", tc.value, err, tc.wantErr)
			continue
		}
		if !tc.wantErr && (got.Name != tc.want.Name || got.IQN != tc.want.IQN || !slices.Equal(got.IPs, tc.want.IPs)) {
			t.Errorf("ParseAnnotation(%q) = %+v, want %+v", tc.value, got, tc.want)
		}
	}
}

// Anyone who may edit Nodes writes the annotation: it must never panic, and
// what it yields must survive a round trip.
func FuzzParseAnnotation(f *testing.F) {
	f.Add(`{"name":"worker-1","iqn":"iqn.1993-08.org.debian:01:w1","ips":["10.0.0.1","fd00::1"]}`)
	f.Add(`{"name":"worker-1","ips":null}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, value string) {
		n, err := ParseAnnotation(value)
		if err != nil {
			return
		}
		again, err := Annotation(n)
		if err != nil {
			t.Fatal(err)
		}
		m, err := ParseAnnotation(again)
		if err != nil || m.Name != n.Name || m.IQN != n.IQN || !slices.Equal(m.IPs, n.IPs) {
			t.Fatalf("round trip of %q: %+v became %+v (%v)", value, n, m, err)
		}
	})
}

// Trident's node JSON as its 20.10 node plugin sent it reads, keeping what
// ontap-csi does not use; as ours sends it, its bytes are Trident's field
// names with deleted always present.
func TestTridentNode(t *testing.T) {
	const trident2010 = `{"name":"worker-1","iqn":"iqn.1993-08.org.debian:01:abc","ips":["10.0.0.1"],` +
		`"nodePrep":{"enabled":false},"hostInfo":{"os":{"distro":"ubuntu"}},"deleted":false}`
	var n TridentNode
	if err := json.Unmarshal([]byte(trident2010), &n); err != nil {
		t.Fatal(err)
	}
	if n.Name != "worker-1" || n.IQN != "iqn.1993-08.org.debian:01:abc" || string(n.HostInfo) != `{"os":{"distro":"ubuntu"}}` {
		t.Errorf("decoded %+v", n)
	}
	got, err := json.Marshal(TridentNode{Name: "worker-1", IPs: []string{"10.0.0.1"}, PublicationState: "clean"})
	if want := `{"name":"worker-1","ips":["10.0.0.1"],"deleted":false,"publicationState":"clean"}`; err != nil || string(got) != want {
		t.Errorf("encoded %s, %v; want %s", got, err, want)
	}
	got, err = json.Marshal(AddNodeResponse{Name: "worker-1", TopologyLabels: map[string]string{"topology.kubernetes.io/zone": "a"}})
	if want := `{"name":"worker-1","topologyLabels":{"topology.kubernetes.io/zone":"a"}}`; err != nil || string(got) != want {
		t.Errorf("answer %s, %v; want %s", got, err, want)
	}
}
