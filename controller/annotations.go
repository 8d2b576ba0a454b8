package controller

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/ontap-csi/ontap-csi/backends"
)

// Claim is what the controller reads of the PersistentVolumeClaim a
// CreateVolume is for (csi-provisioner's --extra-create-metadata names it).
type Claim struct {
	Namespace, Name string
	Annotations     map[string]string
	// VolumeName is the PV the claim is bound to, "" while unbound.
	VolumeName string
	// StorageClass is the claim's spec.storageClassName.
	StorageClass string
}

// The CO's create metadata: csi-provisioner adds these parameters with
// --extra-create-metadata.
const (
	paramPVCName      = "csi.storage.k8s.io/pvc/name"
	paramPVCNamespace = "csi.storage.k8s.io/pvc/namespace"
	paramPVName       = "csi.storage.k8s.io/pv/name"
)

// claimOptions are Trident's PVC annotations (trident.netapp.io/...),
// parsed. Trident builds a volume's config from them and lets each one that
// is set win over what the StorageClass asks for
// (docs/design/trident-compat.md §4.5).
type claimOptions struct {
	options backends.VolumeOptions
	// protocol restricts placement to backends of one protocol; "" any.
	protocol backends.Protocol
	// fileSystem is the file system of an iSCSI volume.
	fileSystem string
	// cloneFromPVC names a claim in the same namespace to clone.
	cloneFromPVC string
}

// Trident's annotation names (frontend/csi/controller_helpers/kubernetes).
const annPrefix = "trident.netapp.io/"

// refusedAnnotations are Trident annotations for features ontap-csi does
// not have. Creating the volume without them would give the claim something
// else than it asks for, so the create fails, naming the annotation.
var refusedAnnotations = map[string]string{
	"cloneFromSnapshot":        "clone from a VolumeSnapshot with the claim's dataSource instead",
	"cloneFromNamespace":       "cross-namespace clones (TridentVolumeReference) are not supported",
	"shareFromPVC":             "subordinate volumes (TridentVolumeReference) are not supported",
	"mirrorRelationship":       "TridentMirrorRelationships are not supported",
	"smbShareAccessControl":    "SMB volumes are not supported",
	"smbShareAdUser":           "SMB volumes are not supported",
	"smbShareAdUserPermission": "SMB volumes are not supported",
}

// ignoredAnnotations have no effect on an ONTAP NFS or iSCSI volume, in
// Trident either, or concern other objects than the volume.
var ignoredAnnotations = map[string]bool{
	"blockSize":                 true, // SolidFire only
	"tieringMinimumCoolingDays": true, // GCNV only
	"cloneToNamespace":          true, // read from a clone source's claim
	"shareToNamespace":          true, // read from a share source's claim
	"podRemediationPolicy":      true, // Trident's node remediation
	"autogrowPolicy":            true, // Trident's autogrow (not implemented)
	"internalSnapshotName":      true, // VolumeSnapshot import
	"configuratorStatus":        true, // StorageClasses of TridentConfigurators
	// Trident reads these only with importOriginalName, which is refused.
	"importBackendUUID": true,
	"notManaged":        true,
	"importNoRename":    true,
}

// parseAnnotations reads a claim's Trident annotations. A value Trident
// would refuse or that cannot be honoured is InvalidArgument naming the
// annotation; annotations that are not Trident's are ignored, as Trident
// ignores them.
func parseAnnotations(ann map[string]string) (*claimOptions, error) {
	c := &claimOptions{}
	keys := make([]string, 0, len(ann))
	for k := range ann {
		if strings.HasPrefix(k, annPrefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, key := range keys {
		name, raw := strings.TrimPrefix(key, annPrefix), ann[key]
		if err := c.set(name, strings.TrimSpace(raw)); err != nil {
			return nil, invalidArg("PVC annotation %s=%q: %v", key, raw, err)
		}
	}
	return c, nil
}

// set applies one annotation.
func (c *claimOptions) set(name, v string) error {
	if why, ok := refusedAnnotations[name]; ok {
		return fmt.Errorf("not supported: %s", why)
	}
	if ignoredAnnotations[name] {
		return nil
	}
	switch name {
	case "protocol":
		switch v {
		case "file", "block":
			c.protocol = backends.Protocol(v)
		case "":
		default:
			return fmt.Errorf("want file or block")
		}
	case "fileSystem":
		c.fileSystem = strings.ToLower(v)
		if c.fileSystem != "" && !blockFSTypes[c.fileSystem] && c.fileSystem != backends.FSTypeRaw {
			return fmt.Errorf("want ext3, ext4 or xfs")
		}
	case "cloneFromPVC":
		c.cloneFromPVC = v
	case "readOnlyClone":
		return refuseTrue(v, "read-only clones are not supported")
	case "luksEncryption", "LUKSEncryption":
		return refuseTrue(v, "LUKS encryption is not supported")
	case "skipRecoveryQueue":
		var err error
		c.options.SkipRecoveryQueue, err = parseBoolPtr(v)
		return err
	case "importOriginalName":
		// Creating a new volume for an import claim would hand the
		// claim an empty volume instead of its data.
		if v != "" {
			return fmt.Errorf("importing through a claim is not supported; adopt the volume with a static PersistentVolume (docs/migration.md)")
		}
	default:
		return c.setVolumeOption(name, v)
	}
	return nil
}

// setVolumeOption applies the annotations that are also StorageClass
// parameters of ontap-csi's, with the same checks.
func (c *claimOptions) setVolumeOption(name, v string) error {
	switch name {
	case "snapshotPolicy", "snapshotReserve", "snapshotDirectory", "unixPermissions",
		"exportPolicy", "splitOnClone", "tieringPolicy":
	default:
		return nil // not one of Trident's: ignored, as Trident does
	}
	if v == "" {
		return nil // Trident treats an empty annotation as absent
	}
	p := &parameters{}
	if _, err := p.setOption(name, v); err != nil {
		return err
	}
	c.options = overlayOptions(c.options, p.options)
	return nil
}

func refuseTrue(v, why string) error {
	b, err := parseBoolOrEmpty(v)
	if err != nil {
		return err
	}
	if b {
		return fmt.Errorf("%s", why)
	}
	return nil
}

func parseBoolOrEmpty(v string) (bool, error) {
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("not a boolean")
	}
	return b, nil
}

// overlayOptions returns base with every option over sets laid on top.
func overlayOptions(base, over backends.VolumeOptions) backends.VolumeOptions {
	overlay(&base.SpaceReserve, over.SpaceReserve)
	overlay(&base.SnapshotPolicy, over.SnapshotPolicy)
	overlay(&base.UnixPermissions, over.UnixPermissions)
	overlay(&base.ExportPolicy, over.ExportPolicy)
	overlay(&base.SecurityStyle, over.SecurityStyle)
	overlay(&base.TieringPolicy, over.TieringPolicy)
	overlay(&base.QoSPolicy, over.QoSPolicy)
	overlay(&base.SnapshotReserve, over.SnapshotReserve)
	overlay(&base.SnapshotDir, over.SnapshotDir)
	overlay(&base.Encryption, over.Encryption)
	overlay(&base.SplitOnClone, over.SplitOnClone)
	overlay(&base.SkipRecoveryQueue, over.SkipRecoveryQueue)
	return base
}

// overlay sets *dst to v unless v is unset ("" or nil).
func overlay[T comparable](dst *T, v T) {
	var unset T
	if v != unset {
		*dst = v
	}
}
