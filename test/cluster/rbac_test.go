package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// nodeInfoKey is the annotation the node plugin writes (package nodeinfo).
const nodeInfoKey = "csi.trident.netapp.io/node-info"

// nodeRBAC (issue 17, least privilege): with the very token a node pod of
// the first node uses, read from that pod's projected volume on the node,
// patch Nodes as a confused or compromised node plugin would. The node's
// own node-info annotation may be written; another Node's, another
// annotation, a label or the spec of its own Node are refused by
// deploy/'s ValidatingAdmissionPolicy, although RBAC grants patch on nodes.
func nodeRBAC(ctx context.Context, s *suite, r *scenarioRun) error {
	own, other := s.cluster.Nodes[0], s.cluster.Nodes[len(s.cluster.Nodes)-1]
	client, err := s.nodePodClient(ctx, own.Name)
	if err != nil {
		return err
	}
	review, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	u := review.Status.UserInfo
	r.note(s, "the node pod's token authenticates as %s with node-name %v", u.Username, u.Extra["authentication.kubernetes.io/node-name"])
	value, err := s.nodeInfo(ctx, own.Name)
	if err != nil {
		return err
	}
	attempts := []struct {
		what, node string
		patch      map[string]any
		allowed    bool
	}{
		{"its own Node's node-info annotation (the value it holds)", own.Name, annotations(map[string]any{nodeInfoKey: value}), true},
		{"another Node's node-info annotation", other.Name, annotations(map[string]any{nodeInfoKey: value}), false},
		{"another annotation of its own Node", own.Name, annotations(map[string]any{"example.com/e2e": "x"}), false},
		{"a label of its own Node", own.Name, map[string]any{"metadata": map[string]any{"labels": map[string]any{"example.com/e2e": "x"}}}, false},
		{"its own Node's spec (cordon)", own.Name, map[string]any{"spec": map[string]any{"unschedulable": true}}, false},
	}
	for _, a := range attempts {
		b, _ := json.Marshal(a.patch)
		_, err := client.CoreV1().Nodes().Patch(ctx, a.node, types.MergePatchType, b, metav1.PatchOptions{FieldManager: "e2e-rbac"})
		switch {
		case a.allowed && err != nil:
			return fmt.Errorf("patching %s was refused: %w", a.what, err)
		case !a.allowed && err == nil:
			return fmt.Errorf("patching %s (%s) was allowed", a.what, b)
		case !a.allowed && !apierrors.IsForbidden(err):
			return fmt.Errorf("patching %s: %w, want Forbidden", a.what, err)
		case a.allowed:
			r.note(s, "patch of %s: allowed", a.what)
		default:
			r.note(s, "patch of %s: %s", a.what, err)
		}
	}
	return nil
}

func annotations(m map[string]any) map[string]any {
	return map[string]any{"metadata": map[string]any{"annotations": m}}
}

func (s *suite) nodeInfo(ctx context.Context, node string) (string, error) {
	n, err := s.cluster.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	v, ok := n.Annotations[nodeInfoKey]
	if !ok {
		return "", fmt.Errorf("Node %s has no %s annotation", node, nodeInfoKey)
	}
	return v, nil
}

// nodePodClient is a client with the service account token of the node
// plugin's pod on a node, as kubelet projected it into the pod.
func (s *suite) nodePodClient(ctx context.Context, node string) (kubernetes.Interface, error) {
	pod, err := s.ds.pluginPod(ctx, node)
	if err != nil {
		return nil, err
	}
	n := s.cluster.Node(node)
	pattern := n.NodePath(filepath.Join("/var/lib/kubelet/pods", string(pod.UID), "volumes/kubernetes.io~projected/*/token"))
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) != 1 {
		return nil, fmt.Errorf("the token of pod %s: %v %v", pod.Name, files, err)
	}
	token, err := os.ReadFile(files[0])
	if err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(s.cluster.RESTConfig)
	cfg.TLSClientConfig = rest.TLSClientConfig{CAFile: cfg.TLSClientConfig.CAFile, CAData: cfg.TLSClientConfig.CAData}
	cfg.BearerToken = strings.TrimSpace(string(token))
	return kubernetes.NewForConfig(cfg)
}
