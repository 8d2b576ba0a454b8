package deploy

import (
	"path"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
)

// Each example backend Secret is what the controller Deployment mounts and
// passes with --backend-config, and ontap-csi's own parser accepts it.
func TestExampleBackendSecrets(t *testing.T) {
	d := get[*appsv1.Deployment](t, kustomize(t, "kustomize/base"), controllerName)
	pod := &d.Spec.Template.Spec
	main := &pod.Containers[0]
	var configs []string
	for _, a := range main.Args {
		if v, ok := strings.CutPrefix(a, "--backend-config="); ok {
			configs = append(configs, v)
		}
	}
	if len(configs) == 0 {
		t.Fatal("the controller gets no --backend-config")
	}
	mounts := mountsByPath(t, pod, main)

	for file, driver := range map[string]string{
		"examples/backend-ontap-nas.yaml": config.DriverONTAPNAS,
		"examples/backend-ontap-san.yaml": config.DriverONTAPSAN,
	} {
		t.Run(filepath.Base(file), func(t *testing.T) {
			secret := get[*corev1.Secret](t, readObjects(t, file), "ontap-csi-backends")
			if secret.Namespace != namespace {
				t.Errorf("namespace %q, want %q", secret.Namespace, namespace)
			}
			for _, cfg := range configs {
				v := mounts[path.Dir(cfg)]
				if v == nil || v.Secret == nil || v.Secret.SecretName != secret.Name {
					t.Fatalf("--backend-config=%s is not in a mount of Secret %s", cfg, secret.Name)
				}
				data, ok := secret.StringData[path.Base(cfg)]
				if !ok {
					t.Fatalf("Secret %s has no key %s", secret.Name, path.Base(cfg))
				}
				c, err := config.Parse(file, []byte(data), t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				if c.StorageDriverName != driver {
					t.Errorf("storageDriverName %q, want %q", c.StorageDriverName, driver)
				}
				if len(c.Warnings) > 0 {
					t.Errorf("the example uses keys without effect: %v", c.Warnings)
				}
				if c.InsecureSkipTLSVerify {
					t.Error("an example must not turn off TLS verification")
				}
			}
		})
	}
}

// The example StorageClasses name our driver, a backend type the examples
// configure, and a file system the node can make.
func TestExampleStorageClasses(t *testing.T) {
	classes := map[string]*storagev1.StorageClass{}
	for _, f := range []string{"examples/storageclass-ontap-nas.yaml", "examples/storageclass-ontap-san.yaml"} {
		for name, sc := range all[*storagev1.StorageClass](readObjects(t, f)) {
			classes[name] = sc
		}
	}
	want := map[string]struct{ backend, fsType string }{
		"ontap-nas":      {config.DriverONTAPNAS, ""},
		"ontap-san":      {config.DriverONTAPSAN, ""},
		"ontap-san-ext4": {config.DriverONTAPSAN, "ext4"},
		"ontap-san-xfs":  {config.DriverONTAPSAN, "xfs"},
	}
	if len(classes) != len(want) {
		t.Errorf("classes %v, want %v", len(classes), len(want))
	}
	for name, w := range want {
		sc := classes[name]
		if sc == nil {
			t.Errorf("no StorageClass %s", name)
			continue
		}
		if sc.Provisioner != driverName {
			t.Errorf("%s: provisioner %q", name, sc.Provisioner)
		}
		if sc.Parameters["backendType"] != w.backend {
			t.Errorf("%s: backendType %q, want %q", name, sc.Parameters["backendType"], w.backend)
		}
		if got := sc.Parameters["csi.storage.k8s.io/fstype"]; got != w.fsType {
			t.Errorf("%s: fstype %q, want %q", name, got, w.fsType)
		}
		if sc.AllowVolumeExpansion == nil || !*sc.AllowVolumeExpansion {
			t.Errorf("%s: volume expansion off", name)
		}
	}
}
