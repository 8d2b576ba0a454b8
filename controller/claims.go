package controller

import (
	"context"
	"errors"
	"regexp"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/backends"
)

// ClaimReader reads PersistentVolumeClaims (the Kubernetes API).
type ClaimReader interface {
	// Claim returns the claim namespace/name, or an error wrapping
	// ErrClaimNotFound.
	Claim(ctx context.Context, namespace, name string) (*Claim, error)
	// ClaimByUID returns the claim with that UID, or an error wrapping
	// ErrClaimNotFound (also when the reader cannot search by UID).
	ClaimByUID(ctx context.Context, uid string) (*Claim, error)
}

// provisionedNameRE is csi-provisioner's volume name: its prefix ("pvc",
// as Trident's deployments leave it) and the claim's UID.
var provisionedNameRE = regexp.MustCompile(`^pvc-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$`)

// ErrClaimNotFound means the claim does not exist.
var ErrClaimNotFound = errors.New("claim not found")

// claimOf reads the claim a CreateVolume is for and parses its Trident
// annotations. csi-provisioner's --extra-create-metadata names the claim.
// Trident's own csi-provisioner (under trident-operator) runs without it;
// there the claim is the one whose UID the volume's name holds. Without a
// claim (no ClaimReader, as under csi-sanity, or no claim of that UID) the
// options are empty.
func (s *Service) claimOf(ctx context.Context, volName string, params map[string]string) (*Claim, *claimOptions, error) {
	ns, name := params[paramPVCNamespace], params[paramPVCName]
	if s.claims == nil {
		if ns != "" {
			logrus.WithContext(ctx).WithField("claim", ns+"/"+name).
				Debug("no Kubernetes API: the claim's trident.netapp.io annotations are not read")
		}
		return nil, &claimOptions{}, nil
	}
	var c *Claim
	var err error
	if ns == "" || name == "" {
		c, err = s.claimByVolumeName(ctx, volName)
	} else {
		c, err = s.readClaim(ctx, ns, name)
	}
	if err != nil || c == nil {
		return nil, &claimOptions{}, err
	}
	opts, err := parseAnnotations(c.Annotations)
	if err != nil {
		return nil, nil, err
	}
	return c, opts, nil
}

// claimByVolumeName finds the claim whose UID csi-provisioner put in the
// volume's name; nil when there is none.
func (s *Service) claimByVolumeName(ctx context.Context, volName string) (*Claim, error) {
	m := provisionedNameRE.FindStringSubmatch(volName)
	if m == nil {
		return nil, nil
	}
	c, err := s.claims.ClaimByUID(ctx, m[1])
	switch {
	case errors.Is(err, ErrClaimNotFound):
		return nil, nil
	case err != nil:
		return nil, backends.Errorf(backends.ErrUnavailable, "finding the PersistentVolumeClaim of volume %s: %w", volName, err)
	}
	return c, nil
}

func (s *Service) readClaim(ctx context.Context, ns, name string) (*Claim, error) {
	c, err := s.claims.Claim(ctx, ns, name)
	switch {
	case errors.Is(err, ErrClaimNotFound):
		return nil, failedPrecondition("PersistentVolumeClaim %s/%s not found: %v", ns, name, err)
	case err != nil:
		return nil, backends.Errorf(backends.ErrUnavailable, "reading PersistentVolumeClaim %s/%s: %w", ns, name, err)
	}
	return c, nil
}

// applyClaim lays a claim's annotations over the request: the volume
// options, the protocol and the file system.
func applyClaim(co *claimOptions, params *parameters, use *volumeUse) error {
	params.options = overlayOptions(params.options, co.options)
	if co.protocol != "" {
		params.protocol = co.protocol
	}
	if co.fileSystem != "" && use.access == backends.AccessMount {
		// Trident lets the annotation win; its node then formats with
		// the capability's fs_type anyway. A contradiction is refused
		// rather than recorded wrong.
		if use.fsType != "" && use.fsType != co.fileSystem {
			return invalidArg("PVC annotation %sfileSystem=%s contradicts the StorageClass's file system %s", annPrefix, co.fileSystem, use.fsType)
		}
		use.fsType = co.fileSystem
	}
	return nil
}

// cloneFromClaim turns Trident's cloneFromPVC annotation into the content
// source it stands for: the volume the named claim, in the same namespace,
// is bound to. A content source in the request wins, as in Trident.
func (s *Service) cloneFromClaim(ctx context.Context, claim *Claim, co *claimOptions, src *csi.VolumeContentSource) (*csi.VolumeContentSource, error) {
	if co.cloneFromPVC == "" || src != nil {
		return src, nil
	}
	source, err := s.readClaim(ctx, claim.Namespace, co.cloneFromPVC)
	if err != nil {
		return nil, err
	}
	if source.VolumeName == "" {
		return nil, failedPrecondition("PVC annotation %scloneFromPVC: claim %s/%s is not bound to a volume yet", annPrefix, claim.Namespace, co.cloneFromPVC)
	}
	return &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{
		Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: source.VolumeName}}}, nil
}
