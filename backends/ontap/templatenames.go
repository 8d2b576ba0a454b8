package ontap

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/nametemplate"
)

// claimSources say where the claim values a nameTemplate may use come
// from, for the error that a request lacks them.
var claimSources = map[string]string{
	".volume.RequestName":  "csi.storage.k8s.io/pvc/name (csi-provisioner --extra-create-metadata)",
	".volume.Namespace":    "csi.storage.k8s.io/pvc/namespace (csi-provisioner --extra-create-metadata)",
	".volume.StorageClass": "the claim's spec.storageClassName (the controller reads the claim through the Kubernetes API)",
}

// newVolumeName is the FlexVol name of a new volume: what its pool's
// nameTemplate renders, else the naming rule's (docs/design/trident-compat.md
// §4.1). A name longer than ONTAP allows is refused (ONTAP would refuse it,
// as it does Trident's). The name is recorded in the volume's context as
// internalName, which csi-provisioner keeps in the PV, and in its comment
// (volumeMeta.InternalName).
func (d *driver) newVolumeName(ctx context.Context, req *backends.CreateRequest) (string, error) {
	name, ok, err := d.templateName(ctx, req)
	switch {
	case err != nil:
		return "", err
	case !ok:
		return d.volumeName(req.Name), nil
	case len(name) > maxVolumeName:
		return "", d.tooLong(req, name, maxVolumeName, "a volume")
	}
	return name, nil
}

// templateName renders the nameTemplate of the request's pool, as
// Trident's GetVolumeNameFromTemplate (storage_drivers/ontap/ontap_common.go)
// does for every ONTAP driver, the economy ones included. ok is false when
// the pool has no template, or when it renders no valid name: the caller's
// naming rule names the volume then, as in Trident. A template that uses a
// claim value the request lacks refuses the create rather than give the
// volume a name Trident would not.
func (d *driver) templateName(ctx context.Context, req *backends.CreateRequest) (name string, ok bool, err error) {
	tpl := d.poolDefaults(req.Pool).NameTemplate
	if tpl == nil {
		return "", false, nil
	}
	name, err = tpl.Render(d.templateData(req))
	var missing *nametemplate.MissingError
	switch {
	case errors.As(err, &missing):
		from := make([]string, 0, len(missing.Fields))
		for _, f := range missing.Fields {
			from = append(from, f+" from "+claimSources[f])
		}
		return "", false, backends.Errorf(backends.ErrInvalid, "backend %s names volumes with nameTemplate %q, which needs what the request does not carry: %s",
			d.Name(), tpl.String(), strings.Join(from, "; "))
	case err != nil:
		logrus.WithContext(ctx).WithError(err).WithFields(logrus.Fields{"volume": req.Name, "nameTemplate": tpl.String()}).
			Warn("nameTemplate gives no volume name; using the naming rule (storagePrefix + PV name), as Trident does")
		return "", false, nil
	}
	return name, true, nil
}

// tooLong refuses a template's name longer than ONTAP takes for what it
// names.
func (d *driver) tooLong(req *backends.CreateRequest, name string, max int, what string) error {
	return backends.Errorf(backends.ErrInvalid, "nameTemplate %q of backend %s renders %q, %d characters: ONTAP allows %d for %s name",
		d.poolDefaults(req.Pool).NameTemplate.String(), d.Name(), name, len(name), max, what)
}

// templateData is what a nameTemplate renders for req, by the names of
// Trident's volume config and backend config fields.
func (d *driver) templateData(req *backends.CreateRequest) nametemplate.Data {
	mode := "Filesystem"
	if req.AccessType == backends.AccessBlock {
		mode = "Block"
	}
	return nametemplate.Data{
		Volume: map[string]string{
			"Name": req.Name, "RequestName": req.Claim.Name, "Namespace": req.Claim.Namespace,
			"StorageClass": req.Claim.StorageClass, "Size": strconv.FormatInt(req.SizeBytes, 10),
			"Protocol": string(d.protocol()), "VolumeMode": mode,
		},
		Config: map[string]string{
			"StoragePrefix": d.cfg.StoragePrefix, "BackendName": d.Name(), "StorageDriverName": d.cfg.StorageDriverName,
			"SVM": d.cfg.SVM, "ManagementLIF": d.cfg.ManagementLIF, "DataLIF": d.cfg.DataLIF,
		},
		Labels: d.poolLabels(req.Pool),
	}
}

// templated reports whether any pool names volumes by a nameTemplate.
func (d *driver) templated() bool {
	if d.cfg.Defaults.NameTemplate != nil {
		return true
	}
	for _, vp := range d.cfg.Storage {
		if vp.Defaults.NameTemplate != nil {
			return true
		}
	}
	return false
}

// listPrefix is the name prefix of the FlexVols ListVolumes reads: the
// storage prefix, or none when a nameTemplate names volumes outside it
// (Trident does not put the prefix in front of a template's name).
func (d *driver) listPrefix() string {
	if d.templated() {
		return ""
	}
	return tridentName(d.cfg.StoragePrefix)
}
