package cluster_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/ontap-csi/ontap-csi/test/cluster/localcluster"
)

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// checkPodSpec checks what kubelet would not tell until the pod runs: a
// $(VAR) in a container's command or arguments that its environment does
// not define stays verbatim, and a mount of an undeclared volume fails the
// pod.
func checkPodSpec(t *testing.T, what string, spec corev1.PodSpec) {
	t.Helper()
	volumes := map[string]bool{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = true
	}
	for _, c := range spec.Containers {
		env := map[string]bool{}
		for _, e := range c.Env {
			env[e.Name] = true
		}
		for _, a := range append(append([]string{}, c.Command...), c.Args...) {
			for _, m := range varRef.FindAllStringSubmatch(a, -1) {
				if !env[m[1]] {
					t.Errorf("%s, container %s: %q refers to $(%s), which its environment does not define", what, c.Name, a, m[1])
				}
			}
		}
		for _, vm := range c.VolumeMounts {
			if !volumes[vm.Name] {
				t.Errorf("%s, container %s: mounts volume %s, which the pod does not declare", what, c.Name, vm.Name)
			}
		}
	}
}

func container(t *testing.T, spec corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	for _, c := range spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %s", name)
	return corev1.Container{}
}

func envValue(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// TestTridentNodeDaemonSet checks scenario 9's node DaemonSets against
// Trident's (docs/design/trident-compat.md §2.1, §2.2) and against what makes
// them start: the arguments are Trident's plus the suite's shim arguments
// only, 26.06 probes the port its --https_port names and keeps new pods off
// a node with an old one, 20.10 does neither, the registrar tells kubelet
// an endpoint inside the plugin directory's host path.
func TestTridentNodeDaemonSet(t *testing.T) {
	sim := simEndpoint{URL: "https://10.250.0.10:8443", CAFile: "/ca.pem"}
	for v, rel := range tridentReleases {
		t.Run(v, func(t *testing.T) {
			ds := tridentNodeDaemonSet(rel, pluginImageB, "10.252.0.9", sim)
			spec := ds.Spec.Template.Spec
			checkPodSpec(t, ds.Name, spec)
			if ds.Name != rel.node || ds.Namespace != tridentNS {
				t.Errorf("DaemonSet %s/%s, want %s/%s", ds.Namespace, ds.Name, tridentNS, rel.node)
			}
			sel := labels.SelectorFromSet(ds.Spec.Selector.MatchLabels)
			if !sel.Matches(labels.Set(ds.Spec.Template.Labels)) || ds.Spec.Template.Labels["app"] != tridentNodeLabel {
				t.Errorf("selector %s, template labels %v", sel, ds.Spec.Template.Labels)
			}
			main := container(t, spec, "trident-main")
			if main.Image != pluginImageB || !slices.Equal(main.Command, []string{"/trident_orchestrator"}) {
				t.Errorf("trident-main runs %v on %s", main.Command, main.Image)
			}
			if want := append(append([]string{}, rel.nodeArgs...), shimArgs("/host")...); !slices.Equal(main.Args, want) {
				t.Errorf("trident-main args\n%v\nwant Trident's and the shims'\n%v", main.Args, want)
			}
			if envValue(main, "TRIDENT_CSI_SERVICE_HOST") != "10.252.0.9" || envValue(main, "CSI_ENDPOINT") != "unix://plugin/csi.sock" {
				t.Errorf("trident-main env %v", main.Env)
			}
			reg := container(t, spec, rel.registrar)
			hostPlugin := ""
			for _, vol := range spec.Volumes {
				if vol.Name == "plugin-dir" {
					hostPlugin = vol.HostPath.Path
				}
			}
			if p := envValue(reg, "REGISTRATION_PATH"); filepath.Dir(p) != filepath.Clean(hostPlugin) || filepath.Base(p) != "csi.sock" {
				t.Errorf("the registrar tells kubelet %s, not csi.sock in the plugin directory %s", p, hostPlugin)
			}
			probed := main.ReadinessProbe != nil && main.LivenessProbe != nil && main.StartupProbe != nil
			anti := spec.Affinity != nil && spec.Affinity.PodAntiAffinity != nil
			if probed != rel.v2606 || anti != rel.v2606 {
				t.Errorf("probes %v, anti-affinity %v; 26.06 has both, 20.10 neither", probed, anti)
			}
			if !rel.v2606 {
				return
			}
			port := ""
			for _, a := range main.Args {
				if p, ok := strings.CutPrefix(a, "--https_port="); ok {
					port = p
				}
			}
			for _, p := range []*corev1.Probe{main.ReadinessProbe, main.LivenessProbe, main.StartupProbe} {
				if p.HTTPGet == nil || p.HTTPGet.Port.String() != port || p.HTTPGet.Scheme != corev1.URISchemeHTTPS {
					t.Errorf("probe %+v does not ask --https_port=%s over HTTPS", p.ProbeHandler, port)
				}
			}
			terms := spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
			if len(terms) != 1 || terms[0].TopologyKey != "kubernetes.io/hostname" ||
				!labels.SelectorFromSet(terms[0].LabelSelector.MatchLabels).Matches(labels.Set(ds.Spec.Template.Labels)) {
				t.Errorf("anti-affinity %+v does not keep a second node pod off a node", terms)
			}
		})
	}
}

// TestTridentControllerDeployment checks scenario 9's controller
// Deployments, built on deploy/'s rendered sidecars: Trident's arguments
// for trident-main, the operator's sidecars (no leader election with one
// replica, no --extra-create-metadata), every reference resolvable.
func TestTridentControllerDeployment(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	repo, err := localcluster.FindRepoRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	m, err := renderDeploy(context.Background(), repo, "ha")
	if err != nil {
		t.Fatal(err)
	}
	s := &suite{m: m}
	for v, rel := range tridentReleases {
		t.Run(v, func(t *testing.T) {
			d, err := s.tridentControllerDeployment(rel, pluginImageA)
			if err != nil {
				t.Fatal(err)
			}
			spec := d.Spec.Template.Spec
			checkPodSpec(t, d.Name, spec)
			if d.Name != rel.ctrl || spec.ServiceAccountName != rel.ctrlSA || *d.Spec.Replicas != 1 {
				t.Errorf("Deployment %s, account %s, %d replicas", d.Name, spec.ServiceAccountName, *d.Spec.Replicas)
			}
			main := container(t, spec, "trident-main")
			if !slices.Equal(main.Args, rel.ctrlArgs) {
				t.Errorf("trident-main args %v, want Trident's %v", main.Args, rel.ctrlArgs)
			}
			hasNS := slices.ContainsFunc(main.Env, func(e corev1.EnvVar) bool { return e.Name == "POD_NAMESPACE" })
			if hasNS != rel.v2606 {
				t.Errorf("POD_NAMESPACE set: %v; 26.06 sets it, 20.10 does not", hasNS)
			}
			var sidecars []string
			for _, c := range spec.Containers[1:] {
				sidecars = append(sidecars, c.Name)
				for _, a := range c.Args {
					if a == "--leader-election" || a == "--extra-create-metadata" {
						t.Errorf("sidecar %s has %s", c.Name, a)
					}
				}
				if c.ImagePullPolicy != corev1.PullNever || !strings.HasPrefix(c.Image, "localhost/") {
					t.Errorf("sidecar %s: image %s, pull %s", c.Name, c.Image, c.ImagePullPolicy)
				}
			}
			slices.Sort(sidecars)
			if want := []string{"csi-attacher", "csi-provisioner", "csi-resizer", "csi-snapshotter"}; !slices.Equal(sidecars, want) {
				t.Errorf("sidecars %v, want %v", sidecars, want)
			}
		})
	}
}
