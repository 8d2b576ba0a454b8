package cluster_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
)

// nodeDS drives the node DaemonSet the way an operator or kubectl would.
type nodeDS struct {
	client kubernetes.Interface
	m      *manifests
	sim    simEndpoint
	obs    *observer
	// current is the variant last applied.
	current nodeVariant
}

func (d *nodeDS) name() string { return d.m.Node.Name }
func (d *nodeDS) ns() string   { return d.m.Node.Namespace }

func (d *nodeDS) selector() string {
	return labels.SelectorFromSet(d.m.Node.Spec.Selector.MatchLabels).String()
}

// create creates the DaemonSet in variant v (kubectl apply of a new object).
func (d *nodeDS) create(ctx context.Context, v nodeVariant) error {
	ds, err := d.m.nodeDaemonSet(v, d.sim)
	if err != nil {
		return err
	}
	if _, err := d.client.AppsV1().DaemonSets(d.ns()).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		return err
	}
	d.current = v
	d.obs.add("test", "created DaemonSet %s (%s)", d.name(), v)
	return nil
}

// update replaces the pod template with variant v: a rolling update.
func (d *nodeDS) update(ctx context.Context, v nodeVariant) error {
	want, err := d.m.nodeDaemonSet(v, d.sim)
	if err != nil {
		return err
	}
	cur, err := d.client.AppsV1().DaemonSets(d.ns()).Get(ctx, d.name(), metav1.GetOptions{})
	if err != nil {
		return err
	}
	cur.Spec.Template = want.Spec.Template
	if _, err := d.client.AppsV1().DaemonSets(d.ns()).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return err
	}
	d.current = v
	d.obs.add("test", "updated DaemonSet %s to %s", d.name(), v)
	return nil
}

// delete deletes the DaemonSet as `kubectl delete ds` does: background
// propagation, the garbage collector then deletes the pods.
func (d *nodeDS) delete(ctx context.Context) error {
	bg := metav1.DeletePropagationBackground
	if err := d.client.AppsV1().DaemonSets(d.ns()).Delete(ctx, d.name(), metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		return err
	}
	d.obs.add("test", "deleted DaemonSet %s (propagation Background, as kubectl)", d.name())
	return nil
}

// pods lists the DaemonSet's pods, terminating ones included.
func (d *nodeDS) pods(ctx context.Context) ([]corev1.Pod, error) {
	l, err := d.client.CoreV1().Pods(d.ns()).List(ctx, metav1.ListOptions{LabelSelector: d.selector()})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// waitPodsGone waits until none of the named pods exists any more.
func (d *nodeDS) waitPodsGone(ctx context.Context, names []string, timeout time.Duration) error {
	return pollUntil(ctx, timeout, func() (bool, string, error) {
		pods, err := d.pods(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		var left []string
		for _, p := range pods {
			for _, n := range names {
				if p.Name == n {
					left = append(left, p.Name+" "+podState(&p))
				}
			}
		}
		return len(left) == 0, strings.Join(left, "; "), nil
	})
}

// waitRollout waits until the DaemonSet runs exactly its desired pods, all
// of the current template, Ready, with no old pod left (terminating ones
// included), and then for minReadySeconds+1 s more: the DaemonSet
// controller can stall a surge rollout when a new one starts sooner
// (docs/design/local-cluster.md §4).
func (d *nodeDS) waitRollout(ctx context.Context, timeout time.Duration) error {
	var ds *appsv1.DaemonSet
	polls := 0
	err := pollUntil(ctx, timeout, func() (bool, string, error) {
		polls++
		var err error
		ds, err = d.client.AppsV1().DaemonSets(d.ns()).Get(ctx, d.name(), metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		st := ds.Status
		pods, err := d.pods(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		desc := fmt.Sprintf("generation %d observed %d desired %d updated %d ready %d available %d; pods:",
			ds.Generation, st.ObservedGeneration, st.DesiredNumberScheduled, st.UpdatedNumberScheduled,
			st.NumberReady, st.NumberAvailable)
		for _, p := range pods {
			desc += " " + p.Name + " " + podState(&p) + ";"
		}
		done := st.ObservedGeneration >= ds.Generation && st.DesiredNumberScheduled > 0 &&
			st.UpdatedNumberScheduled == st.DesiredNumberScheduled &&
			st.NumberAvailable == st.DesiredNumberScheduled && st.NumberReady == st.DesiredNumberScheduled &&
			int32(len(pods)) == st.DesiredNumberScheduled
		for _, p := range pods {
			done = done && podReady(&p) && d.matchesTemplate(&p, ds)
		}
		return done, desc, nil
	})
	if err != nil {
		return fmt.Errorf("DaemonSet %s rollout: %w", d.name(), err)
	}
	if polls > 1 { // it was not rolled out already
		d.obs.add("test", "DaemonSet %s rolled out (%s)", d.name(), d.current)
	}
	time.Sleep(time.Duration(ds.Spec.MinReadySeconds+1) * time.Second)
	return nil
}

// matchesTemplate compares a pod with the DaemonSet's template by images
// and container names, which is what the variants change.
func (d *nodeDS) matchesTemplate(p *corev1.Pod, ds *appsv1.DaemonSet) bool {
	want := ds.Spec.Template.Spec.Containers
	if len(p.Spec.Containers) != len(want) {
		return false
	}
	for i := range want {
		if p.Spec.Containers[i].Name != want[i].Name || p.Spec.Containers[i].Image != want[i].Image {
			return false
		}
	}
	return true
}

// pluginPod returns the one live (non-terminating) pod on a node.
func (d *nodeDS) pluginPod(ctx context.Context, node string) (*corev1.Pod, error) {
	pods, err := d.pods(ctx)
	if err != nil {
		return nil, err
	}
	var out *corev1.Pod
	for i := range pods {
		if pods[i].DeletionTimestamp == nil && pods[i].Spec.NodeName == node {
			if out != nil {
				return nil, fmt.Errorf("more than one live pod on %s: %s, %s", node, out.Name, pods[i].Name)
			}
			out = &pods[i]
		}
	}
	if out == nil {
		return nil, fmt.Errorf("no live pod of DaemonSet %s on %s", d.name(), node)
	}
	return out, nil
}

// exists reports whether the DaemonSet object exists.
func (d *nodeDS) exists(ctx context.Context) (bool, error) {
	_, err := d.client.AppsV1().DaemonSets(d.ns()).Get(ctx, d.name(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// pollUntil calls f every 200 ms until it reports done, returning the last
// description on timeout.
func pollUntil(ctx context.Context, timeout time.Duration, f func() (bool, string, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last string
	for {
		done, desc, err := f()
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		last = desc
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w; last state: %s", ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
