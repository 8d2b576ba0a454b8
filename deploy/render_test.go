package deploy

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// strictDecoder decodes YAML or JSON into the typed k8s.io/api objects and
// fails on unknown or duplicate fields, as `kubectl apply --validate=strict`
// does. Field names are matched case-sensitively.
var strictDecoder = serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()

// object is one decoded manifest object.
type object struct {
	gvk  schema.GroupVersionKind
	name string
	ns   string
	obj  runtime.Object
}

func (o object) key() string {
	return fmt.Sprintf("%s/%s %s/%s", o.gvk.GroupVersion(), o.gvk.Kind, o.ns, o.name)
}

// objects is a rendered set, keyed by object.key.
type objects map[string]object

// tool runs one of the renderers pinned in tools/go.mod. `go tool` builds it
// on first use (minutes, once per build cache) and reuses it afterwards.
func tool(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	toolsDir, err := filepath.Abs("tools")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", append([]string{"-C", toolsDir, "tool", name}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go tool %s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// toolErr is tool for renders that are meant to fail.
func toolErr(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	toolsDir, err := filepath.Abs("tools")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", append([]string{"-C", toolsDir, "tool", name}, args...)...).CombinedOutput()
	return string(out), err
}

var renderCache sync.Map // command line -> []byte

func cachedTool(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	key := name + "\x00" + strings.Join(args, "\x00")
	if out, ok := renderCache.Load(key); ok {
		return out.([]byte)
	}
	out := tool(t, name, args...)
	renderCache.Store(key, out)
	return out
}

// kustomize renders a kustomization directory (relative to deploy/).
func kustomize(t *testing.T, dir string) objects {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return decodeAll(t, "kustomize "+dir, cachedTool(t, "kustomize", "build", abs))
}

// helm renders the chart with the given --set values; hooks included.
func helm(t *testing.T, sets ...string) objects {
	t.Helper()
	return decodeAll(t, "helm "+strings.Join(sets, " "), cachedTool(t, "helm", helmArgs(t, sets...)...))
}

func helmArgs(t *testing.T, sets ...string) []string {
	t.Helper()
	chart, err := filepath.Abs("helm/ontap-csi")
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"template", "ontap-csi", chart}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	return args
}

// decodeAll splits a multi-document YAML stream and decodes every document
// strictly. Empty documents (comments only) are skipped.
func decodeAll(t *testing.T, what string, stream []byte) objects {
	t.Helper()
	out := objects{}
	for i, doc := range splitYAML(stream) {
		o, err := decodeStrict(doc)
		if err != nil {
			t.Fatalf("%s: document %d: %v\n%s", what, i, err, doc)
		}
		if _, dup := out[o.key()]; dup {
			t.Fatalf("%s: %s rendered twice", what, o.key())
		}
		out[o.key()] = o
	}
	if len(out) == 0 {
		t.Fatalf("%s rendered no objects", what)
	}
	return out
}

func decodeStrict(doc []byte) (object, error) {
	obj, gvk, err := strictDecoder.Decode(doc, nil, nil)
	if err != nil {
		return object{}, err
	}
	acc, ok := obj.(interface {
		GetName() string
		GetNamespace() string
	})
	if !ok {
		return object{}, fmt.Errorf("%s has no object metadata", gvk)
	}
	if acc.GetName() == "" {
		return object{}, fmt.Errorf("%s without a name", gvk)
	}
	return object{gvk: *gvk, name: acc.GetName(), ns: acc.GetNamespace(), obj: obj}, nil
}

// splitYAML splits a YAML stream at document separators and drops documents
// without content.
func splitYAML(stream []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	flush := func() {
		if hasContent(cur.Bytes()) {
			docs = append(docs, append([]byte(nil), cur.Bytes()...))
		}
		cur.Reset()
	}
	for _, line := range strings.SplitAfter(string(stream), "\n") {
		if strings.TrimRight(line, " \r\n") == "---" {
			flush()
			continue
		}
		cur.WriteString(line)
	}
	flush()
	return docs
}

func hasContent(doc []byte) bool {
	for _, line := range strings.Split(string(doc), "\n") {
		l := strings.TrimSpace(line)
		if l != "" && !strings.HasPrefix(l, "#") {
			return true
		}
	}
	return false
}

// readObjects decodes a YAML file of deploy/ strictly.
func readObjects(t *testing.T, path string) objects {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return decodeAll(t, path, b)
}

func (objs objects) keys() []string {
	ks := make([]string, 0, len(objs))
	for k := range objs {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// get returns the one object of type T with the given name; it fails the
// test if there is none.
func get[T runtime.Object](t *testing.T, objs objects, name string) T {
	t.Helper()
	for _, o := range objs {
		if v, ok := o.obj.(T); ok && o.name == name {
			return v
		}
	}
	var zero T
	t.Fatalf("no %T named %q among %v", zero, name, objs.keys())
	return zero
}

// all returns every object of type T, by name.
func all[T runtime.Object](objs objects) map[string]T {
	out := map[string]T{}
	for _, o := range objs {
		if v, ok := o.obj.(T); ok {
			out[o.name] = v
		}
	}
	return out
}

// toYAML is for failure messages.
func toYAML(v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return string(b)
}
