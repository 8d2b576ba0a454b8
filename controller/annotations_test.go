package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/ontap-csi/ontap-csi/backends"
)

// fakeClaims is an in-memory ClaimReader.
type fakeClaims struct {
	claims map[string]*Claim // "<ns>/<name>"
	byUID  map[string]*Claim
	err    error
	reads  int
}

func (f *fakeClaims) ClaimByUID(_ context.Context, uid string) (*Claim, error) {
	f.reads++
	if f.err != nil {
		return nil, f.err
	}
	if c, ok := f.byUID[uid]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("uid %s: %w", uid, ErrClaimNotFound)
}

func (f *fakeClaims) Claim(_ context.Context, ns, name string) (*Claim, error) {
	f.reads++
	if f.err != nil {
		return nil, f.err
	}
	c, ok := f.claims[ns+"/"+name]
	if !ok {
		return nil, fmt.Errorf("%s/%s: %w", ns, name, ErrClaimNotFound)
	}
	return c, nil
}

func claimService(t *testing.T, claims ...*Claim) (*Service, *fakeBackend, *fakeBackend, *fakeClaims) {
	t.Helper()
	s, nas, san := newService(t)
	fc := &fakeClaims{claims: map[string]*Claim{}}
	for _, c := range claims {
		fc.claims[c.Namespace+"/"+c.Name] = c
	}
	s.claims = fc
	return s, nas, san, fc
}

// claimParams is what csi-provisioner --extra-create-metadata adds.
func claimParams(ns, name string, extra map[string]string) map[string]string {
	p := map[string]string{paramPVCNamespace: ns, paramPVCName: name, paramPVName: "pvc-1"}
	for k, v := range extra {
		p[k] = v
	}
	return p
}

func annotated(ns, name string, ann map[string]string) *Claim {
	full := map[string]string{}
	for k, v := range ann {
		full[annPrefix+k] = v
	}
	return &Claim{Namespace: ns, Name: name, Annotations: full}
}

// The claim's Trident annotations win over the StorageClass's parameters,
// which win over the backend's defaults (the fake records the request).
func TestClaimAnnotationsOverStorageClass(t *testing.T) {
	claim := annotated("apps", "data", map[string]string{
		"snapshotPolicy": "default", "snapshotReserve": "20", "snapshotDirectory": "TRUE", "unixPermissions": "0750",
		"exportPolicy": "apps", "splitOnClone": "true", "skipRecoveryQueue": "true", "tieringPolicy": "auto",
		"protocol": "file", "blockSize": "4096", "notTrident": "x",
	})
	claim.Annotations["example.com/other"] = "ignored"
	s, nas, san, _ := claimService(t, claim)
	params := claimParams("apps", "data", map[string]string{
		"snapshotPolicy": "none", "snapshotReserve": "0", "exportPolicy": "sc", "provisioningType": "thick", "qosPolicy": "gold",
	})
	_, err := s.CreateVolume(context.Background(), &csi.CreateVolumeRequest{
		Name: "pvc-1", VolumeCapabilities: []*csi.VolumeCapability{mountCap(rwo, "")}, Parameters: params,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(san.creates) != 0 || len(nas.creates) != 1 {
		t.Fatalf("protocol=file: nas %d creates, san %d", len(nas.creates), len(san.creates))
	}
	o := nas.creates[0].Options
	if o.SnapshotPolicy != "default" || *o.SnapshotReserve != 20 || !*o.SnapshotDir || o.UnixPermissions != "0750" ||
		o.ExportPolicy != "apps" || !*o.SplitOnClone || !*o.SkipRecoveryQueue || o.TieringPolicy != "auto" {
		t.Errorf("annotations not applied over the class: %+v", o)
	}
	if o.SpaceReserve != "volume" || o.QoSPolicy != "gold" {
		t.Errorf("class parameters the claim does not set were lost: %+v", o)
	}
}

func TestClaimAnnotationProtocolBlock(t *testing.T) {
	s, nas, san, _ := claimService(t, annotated("ns", "c", map[string]string{"protocol": "block", "fileSystem": "xfs"}))
	vol, err := s.CreateVolume(context.Background(), &csi.CreateVolumeRequest{
		Name: "pvc-1", VolumeCapabilities: []*csi.VolumeCapability{mountCap(rwo, "")}, Parameters: claimParams("ns", "c", nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(nas.creates) != 0 || len(san.creates) != 1 || san.creates[0].FSType != "xfs" {
		t.Fatalf("protocol=block, fileSystem=xfs: %v; nas %d, san %+v", vol, len(nas.creates), san.creates)
	}
}

// A bad value is InvalidArgument naming the annotation, and nothing is
// created.
func TestClaimAnnotationRefused(t *testing.T) {
	for _, tc := range []struct {
		ann  map[string]string
		caps []*csi.VolumeCapability
		want string
	}{
		{map[string]string{"snapshotReserve": "95"}, nil, "trident.netapp.io/snapshotReserve"},
		{map[string]string{"snapshotReserve": "x"}, nil, "trident.netapp.io/snapshotReserve"},
		{map[string]string{"snapshotDirectory": "maybe"}, nil, "trident.netapp.io/snapshotDirectory"},
		{map[string]string{"splitOnClone": "yes please"}, nil, "trident.netapp.io/splitOnClone"},
		{map[string]string{"skipRecoveryQueue": "2"}, nil, "trident.netapp.io/skipRecoveryQueue"},
		{map[string]string{"protocol": "nvme"}, nil, "trident.netapp.io/protocol"},
		{map[string]string{"fileSystem": "ntfs"}, nil, "trident.netapp.io/fileSystem"},
		{map[string]string{"fileSystem": "xfs"}, []*csi.VolumeCapability{mountCap(rwo, "ext4")}, "trident.netapp.io/fileSystem"},
		{map[string]string{"cloneFromSnapshot": "snap1"}, nil, "trident.netapp.io/cloneFromSnapshot"},
		{map[string]string{"mirrorRelationship": "tmr"}, nil, "trident.netapp.io/mirrorRelationship"},
		{map[string]string{"readOnlyClone": "true"}, nil, "trident.netapp.io/readOnlyClone"},
		{map[string]string{"luksEncryption": "true"}, nil, "trident.netapp.io/luksEncryption"},
		{map[string]string{"importOriginalName": "vol1", "importBackendUUID": "nas1"}, nil, "trident.netapp.io/importOriginalName"},
		{map[string]string{"shareFromPVC": "ns2/src"}, nil, "trident.netapp.io/shareFromPVC"},
		{map[string]string{"smbShareAdUser": "bob"}, nil, "trident.netapp.io/smbShareAdUser"},
		{map[string]string{"exportPolicy": "bad name!"}, nil, "trident.netapp.io/exportPolicy"},
		{map[string]string{"unixPermissions": "999"}, nil, "trident.netapp.io/unixPermissions"},
		{map[string]string{"tieringPolicy": "sometimes"}, nil, "trident.netapp.io/tieringPolicy"},
	} {
		s, nas, san, _ := claimService(t, annotated("ns", "c", tc.ann))
		caps := tc.caps
		if caps == nil {
			caps = []*csi.VolumeCapability{mountCap(rwo, "")}
		}
		_, err := s.CreateVolume(context.Background(), &csi.CreateVolumeRequest{
			Name: "pvc-1", VolumeCapabilities: caps, Parameters: claimParams("ns", "c", nil),
		})
		if code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want InvalidArgument naming %s", tc.ann, err, tc.want)
		}
		if len(nas.creates)+len(san.creates) != 0 {
			t.Errorf("%v: a volume was created", tc.ann)
		}
	}
}

// Without the create metadata the claim is not read (csi-sanity, or a
// provisioner without --extra-create-metadata); a claim that cannot be read
// fails the create so that the CO retries, rather than ignoring what the
// claim asks for.
func TestClaimReading(t *testing.T) {
	s, _, _, fc := claimService(t)
	caps := []*csi.VolumeCapability{mountCap(rwo, "")}
	if _, err := s.CreateVolume(context.Background(), &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: caps}); err != nil || fc.reads != 0 {
		t.Fatalf("without metadata: %v, %d reads", err, fc.reads)
	}
	_, err := s.CreateVolume(context.Background(), &csi.CreateVolumeRequest{Name: "pvc-2", VolumeCapabilities: caps, Parameters: claimParams("ns", "gone", nil)})
	if code(err) != codes.FailedPrecondition {
		t.Errorf("missing claim: %v, want FailedPrecondition", err)
	}
	fc.err = fmt.Errorf("connection refused")
	_, err = s.CreateVolume(context.Background(), &csi.CreateVolumeRequest{Name: "pvc-3", VolumeCapabilities: caps, Parameters: claimParams("ns", "c", nil)})
	if code(err) != codes.Unavailable {
		t.Errorf("API down: %v, want Unavailable", err)
	}
	// A retried create of a volume that exists is answered although its
	// claim cannot be read (the API is still down).
	if _, err := s.CreateVolume(context.Background(), &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: caps,
		Parameters: claimParams("ns", "c", nil)}); err != nil {
		t.Errorf("retry of an existing volume: %v", err)
	}
}

// trident.netapp.io/cloneFromPVC clones the volume the named claim of the
// same namespace is bound to; a content source in the request wins.
func TestClaimCloneFromPVC(t *testing.T) {
	src := &Claim{Namespace: "ns", Name: "src", VolumeName: "pvc-src"}
	pending := &Claim{Namespace: "ns", Name: "pending"}
	s, nas, _, _ := claimService(t, annotated("ns", "c", map[string]string{"cloneFromPVC": "src"}),
		annotated("ns", "d", map[string]string{"cloneFromPVC": "pending"}),
		annotated("ns", "e", map[string]string{"cloneFromPVC": "src", "protocol": "block"}), src, pending)
	caps := []*csi.VolumeCapability{mountCap(rwo, "")}
	ctx := context.Background()
	if _, err := s.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-src", VolumeCapabilities: caps,
		Parameters: map[string]string{"backendType": "ontap-nas"}}); err != nil {
		t.Fatal(err)
	}
	vol, err := s.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: caps, Parameters: claimParams("ns", "c", nil)})
	if err != nil {
		t.Fatal(err)
	}
	if got := nas.creates[1].Source; got == nil || got.Volume == nil || got.Volume.ID != "pvc-src" {
		t.Fatalf("cloneFromPVC: source %+v", got)
	}
	if vol.GetVolume().GetContentSource().GetVolume().GetVolumeId() != "pvc-src" {
		t.Errorf("the response does not name the clone's source: %v", vol)
	}
	_, err = s.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-2", VolumeCapabilities: caps, Parameters: claimParams("ns", "d", nil)})
	if code(err) != codes.FailedPrecondition {
		t.Errorf("clone of an unbound claim: %v, want FailedPrecondition", err)
	}
	_, err = s.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-3", VolumeCapabilities: caps, Parameters: claimParams("ns", "e", nil)})
	if code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "protocol") {
		t.Errorf("block clone of a file volume: %v, want InvalidArgument naming the protocol", err)
	}
}

func TestOverlayOptions(t *testing.T) {
	yes, no, five := true, false, 5
	base := backends.VolumeOptions{SnapshotPolicy: "a", SnapshotDir: &yes, SnapshotReserve: &five, QoSPolicy: "q"}
	got := overlayOptions(base, backends.VolumeOptions{SnapshotPolicy: "b", SnapshotDir: &no})
	if got.SnapshotPolicy != "b" || *got.SnapshotDir || *got.SnapshotReserve != 5 || got.QoSPolicy != "q" {
		t.Errorf("overlay: %+v", got)
	}
}

// Under trident-operator csi-provisioner does not name the claim: it is
// found by the UID in the volume's name. A name without a UID, or a UID of
// no claim, creates the volume without annotations; an API that does not
// answer fails the create (Unavailable) rather than ignore the claim.
func TestClaimByVolumeName(t *testing.T) {
	const uid = "5e0c8a43-1b2d-4c6e-9f70-8a9b0c1d2e3f"
	caps := []*csi.VolumeCapability{mountCap(rwo, "")}
	for _, tc := range []struct {
		name, volume string
		params       map[string]string
		apiErr       error
		wantCode     codes.Code
		wantPolicy   string // the created volume's snapshot policy
		wantReads    int
	}{
		{"by UID", "pvc-" + uid, nil, nil, codes.OK, "from-uid", 1},
		{"named by metadata", "pvc-" + uid, claimParams("ns", "named", nil), nil, codes.OK, "from-name", 1},
		{"UID of no claim", "pvc-0f1e2d3c-4b5a-4968-8776-655443322110", nil, nil, codes.OK, "", 1},
		{"no UID in the name", "volume-1", nil, nil, codes.OK, "", 0},
		{"upper-case is no UID", "pvc-" + strings.ToUpper(uid), nil, nil, codes.OK, "", 0},
		{"API down", "pvc-" + uid, nil, errors.New("connection refused"), codes.Unavailable, "", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, nas, _, fc := claimService(t, annotated("ns", "named", map[string]string{"snapshotPolicy": "from-name"}))
			fc.byUID = map[string]*Claim{uid: annotated("ns", "c", map[string]string{"snapshotPolicy": "from-uid"})}
			fc.err = tc.apiErr
			params := map[string]string{"backendType": "ontap-nas"}
			for k, v := range tc.params {
				params[k] = v
			}
			_, err := s.CreateVolume(context.Background(), &csi.CreateVolumeRequest{
				Name: tc.volume, VolumeCapabilities: caps, Parameters: params})
			if code(err) != tc.wantCode || fc.reads != tc.wantReads {
				t.Fatalf("%v after %d claim reads; want %v after %d", err, fc.reads, tc.wantCode, tc.wantReads)
			}
			if err == nil && nas.creates[0].Options.SnapshotPolicy != tc.wantPolicy {
				t.Errorf("snapshot policy %q, want %q", nas.creates[0].Options.SnapshotPolicy, tc.wantPolicy)
			}
		})
	}
}

// The backend learns the claim a volume is for (Trident's nameTemplate
// renders it): from csi-provisioner's metadata, overlaid by the claim
// itself when the Kubernetes API is read (it alone knows the storage
// class), or found by the UID in the volume's name.
func TestCreateRequestCarriesTheClaim(t *testing.T) {
	const uid = "5e0c8a43-1b2d-4c6e-9f70-8a9b0c1d2e3f"
	named := &Claim{Namespace: "apps", Name: "data-0", StorageClass: "gold"}
	byUID := &Claim{Namespace: "ops", Name: "logs", StorageClass: "silver"}
	for _, tc := range []struct {
		name   string
		api    bool // a ClaimReader is configured
		params map[string]string
		want   backends.Claim
	}{
		{"metadata, no API", false, claimParams("apps", "data-0", nil), backends.Claim{Name: "data-0", Namespace: "apps"}},
		{"metadata and API", true, claimParams("apps", "data-0", nil), backends.Claim{Name: "data-0", Namespace: "apps", StorageClass: "gold"}},
		{"API by UID", true, nil, backends.Claim{Name: "logs", Namespace: "ops", StorageClass: "silver"}},
		{"neither", false, nil, backends.Claim{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, nas, _, fc := claimService(t, named)
			fc.byUID = map[string]*Claim{uid: byUID}
			if !tc.api {
				s.claims = nil
			}
			params := map[string]string{"backendType": "ontap-nas"}
			for k, v := range tc.params {
				params[k] = v
			}
			_, err := s.CreateVolume(context.Background(), &csi.CreateVolumeRequest{
				Name: "pvc-" + uid, VolumeCapabilities: []*csi.VolumeCapability{mountCap(rwo, "")}, Parameters: params})
			if err != nil {
				t.Fatal(err)
			}
			if got := nas.creates[0].Claim; got != tc.want {
				t.Errorf("claim %+v, want %+v", got, tc.want)
			}
		})
	}
}
