package cluster_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/restmapper"
)

// manifests are the objects of a deploy/ rendering.
type manifests struct {
	Namespace string
	// Objects are created as they are: namespace, RBAC, CSIDriver,
	// admission policies.
	Objects []runtime.Object
	// Node is the node DaemonSet as rendered; nodeDaemonSet derives the
	// variants the scenarios apply.
	Node *appsv1.DaemonSet
	// Controller is the controller Deployment as rendered;
	// controllerDeployment swaps in the local images.
	Controller *appsv1.Deployment
}

// renderDeploy renders a deploy/kustomize overlay with the kustomize that
// deploy/tools pins (the same one deploy's own tests use) and decodes every
// object into its typed form: a kind the test does not know fails it, which
// keeps the suite honest when deploy/ grows.
func renderDeploy(ctx context.Context, repo, overlay string) (*manifests, error) {
	cmd := exec.CommandContext(ctx, "go", "tool", "kustomize", "build", filepath.Join(repo, "deploy", "kustomize", overlay))
	cmd.Dir = filepath.Join(repo, "deploy", "tools")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("kustomize build deploy/kustomize/%s: %v: %s", overlay, err, stderr.String())
	}
	objs, err := decodeTyped(out)
	if err != nil {
		return nil, err
	}
	m := &manifests{}
	for _, obj := range objs {
		switch o := obj.(type) {
		case *appsv1.DaemonSet:
			if m.Node != nil {
				return nil, fmt.Errorf("two DaemonSets rendered: %s and %s", m.Node.Name, o.Name)
			}
			m.Node = o
		case *appsv1.Deployment:
			m.Controller = o
		case *corev1.Namespace:
			m.Namespace = o.Name
			m.Objects = append(m.Objects, o)
		case *corev1.ServiceAccount, *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding, *rbacv1.Role,
			*rbacv1.RoleBinding, *storagev1.CSIDriver, *corev1.ConfigMap, *corev1.Secret,
			*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
			m.Objects = append(m.Objects, o)
		default:
			return nil, fmt.Errorf("deploy/kustomize/%s renders a %T the e2e test does not know how to install", overlay, obj)
		}
	}
	if m.Node == nil || m.Controller == nil || m.Namespace == "" {
		return nil, fmt.Errorf("deploy/kustomize/%s rendered no node DaemonSet, controller Deployment or namespace", overlay)
	}
	return m, nil
}

// decodeTyped decodes a YAML stream into typed objects.
func decodeTyped(stream []byte) ([]runtime.Object, error) {
	var out []runtime.Object
	err := eachDocument(stream, func(doc []byte) error {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			return fmt.Errorf("decoding rendered object: %w\n%s", err, doc)
		}
		out = append(out, obj)
		return nil
	})
	return out, err
}

// decodeUnstructured decodes a YAML stream into unstructured objects (kinds
// outside client-go's scheme: CRDs, snapshot classes).
func decodeUnstructured(stream []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	err := eachDocument(stream, func(doc []byte) error {
		u := &unstructured.Unstructured{}
		if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(doc), 4096).Decode(&u.Object); err != nil {
			return err
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
		return nil
	})
	return out, err
}

func eachDocument(stream []byte, f func([]byte) error) error {
	dec := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	for {
		doc, err := dec.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(doc)) == 0 || len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		if err := f(doc); err != nil {
			return err
		}
	}
}

func stripComments(doc []byte) []byte {
	var b bytes.Buffer
	for _, l := range strings.Split(string(doc), "\n") {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") && t != "---" {
			b.WriteString(l + "\n")
		}
	}
	return b.Bytes()
}

// installer creates objects of any kind through the dynamic client.
type installer struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
}

func newInstallerFor(s *suite) *installer {
	disc := memory.NewMemCacheClient(s.cluster.Client.Discovery())
	return &installer{dyn: s.dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(disc)}
}

// create creates obj (typed or unstructured).
func (in *installer) create(ctx context.Context, obj runtime.Object) error {
	u, res, err := in.resource(obj)
	if err != nil {
		return err
	}
	_, err = res.Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

// remove deletes obj, in the foreground; a missing object is no error.
func (in *installer) remove(ctx context.Context, obj runtime.Object) error {
	u, res, err := in.resource(obj)
	if err != nil {
		return err
	}
	fg := metav1.DeletePropagationForeground
	if err := res.Delete(ctx, u.GetName(), metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// resource returns obj as unstructured and the dynamic client of its kind.
func (in *installer) resource(obj runtime.Object) (*unstructured.Unstructured, dynamic.ResourceInterface, error) {
	u, err := toUnstructured(obj)
	if err != nil {
		return nil, nil, err
	}
	gvk := u.GroupVersionKind()
	m, err := in.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		// A CRD created a moment ago: discovery may not list it yet.
		if r, ok := in.mapper.(interface{ Reset() }); ok {
			r.Reset()
		}
		if m, err = in.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			return nil, nil, err
		}
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return u, in.dyn.Resource(m.Resource).Namespace(u.GetNamespace()), nil
	}
	return u, in.dyn.Resource(m.Resource), nil
}

// toUnstructured converts a typed object, setting its apiVersion and kind
// from the scheme (typed decoding leaves them empty).
func toUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u, nil
	}
	gvks, _, err := scheme.Scheme.ObjectKinds(obj)
	if err != nil {
		return nil, err
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvks[0])
	return u, nil
}

// readModuleFile reads a file of a module the sidecars module requires,
// from the module cache (go list -m -json gives its directory).
func readModuleFile(ctx context.Context, sidecarModule, module, rel string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", module)
	cmd.Dir = sidecarModule
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m %s: %w", module, err)
	}
	return os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), rel))
}
