package controller

import (
	"context"
	"errors"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/backends"
)

// ClaimReader reads PersistentVolumeClaims (the Kubernetes API).
type ClaimReader interface {
	// Claim returns the claim namespace/name, or an error wrapping
	// ErrClaimNotFound.
	Claim(ctx context.Context, namespace, name string) (*Claim, error)
}

// ErrClaimNotFound means the claim does not exist.
var ErrClaimNotFound = errors.New("claim not found")

// claimOf reads the claim a CreateVolume is for and parses its Trident
// annotations. Without csi-provisioner's --extra-create-metadata (or
// without a ClaimReader) there is no claim: the annotations are not read,
// and nil options are returned.
func (s *Service) claimOf(ctx context.Context, params map[string]string) (*Claim, *claimOptions, error) {
	ns, name := params[paramPVCNamespace], params[paramPVCName]
	if ns == "" || name == "" {
		return nil, &claimOptions{}, nil
	}
	if s.claims == nil {
		logrus.WithContext(ctx).WithField("claim", ns+"/"+name).
			Debug("no Kubernetes API: the claim's trident.netapp.io annotations are not read")
		return nil, &claimOptions{}, nil
	}
	c, err := s.readClaim(ctx, ns, name)
	if err != nil {
		return nil, nil, err
	}
	opts, err := parseAnnotations(c.Annotations)
	if err != nil {
		return nil, nil, err
	}
	return c, opts, nil
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
