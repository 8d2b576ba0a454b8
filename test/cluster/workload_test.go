package cluster_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/ontap-csi/ontap-csi/test/cluster/localcluster"
)

const workloadNS = "e2e-workload"

// workload is the load the scenarios run under on one node: a pod that
// keeps its volume mounted and written for the whole test (the keeper), and
// a pod created and deleted over and over on a second volume (the churn),
// so that kubelet stages, publishes, unpublishes and unstages all the time.
// Both volumes are provisioned from deploy/examples' ontap-nas class. A
// second keeper writes to an iSCSI volume (ontap-san-ext4), so that every
// rollout also hands over a node with a LUN staged and in use; its data is
// checked by the keeper itself (it exits on any failed write, a changed
// device or a missing seed), which shows as a restart.
type workload struct {
	client kubernetes.Interface
	obs    *observer
	sim    *http.Client // the simulator's data plane, through the forwarded socket
	node   *localcluster.Node

	mu     sync.Mutex
	cycles []churnCycle
	// stopped ends the churn (the node is being removed).
	stopped bool
}

func (w *workload) keeperPod() string   { return "keeper-" + w.node.Name }
func (w *workload) keeperClaim() string { return "keeper-" + w.node.Name }
func (w *workload) churnClaim() string  { return "churn-" + w.node.Name }
func (w *workload) iscsiKeeper() string { return "iscsi-keeper-" + w.node.Name }

// churnCycle is one create → Running → delete → gone of a churn pod.
type churnCycle struct {
	Pod                  string
	Created, Running     time.Time
	Deleted, Gone        time.Time
	Err                  string
	MountFailed, Timeout bool
}

// claim is a PersistentVolumeClaim of a StorageClass: the provisioner
// makes its volume.
func claim(ns, name, class string, mode corev1.PersistentVolumeAccessMode, size string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{mode},
			StorageClassName: ptr.To(class),
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: resource.MustParse(size),
			}},
		},
	}
}

// start provisions the node's two volumes, starts the keeper and then the
// churn, and waits for one full churn cycle, which proves the data path.
func (w *workload) start(ctx context.Context) error {
	claims := []*corev1.PersistentVolumeClaim{
		claim(workloadNS, w.keeperClaim(), nasClass, corev1.ReadWriteMany, "1Gi"),
		claim(workloadNS, w.churnClaim(), nasClass, corev1.ReadWriteMany, "1Gi"),
		claim(workloadNS, w.iscsiKeeper(), sanClass, corev1.ReadWriteOnce, "1Gi"),
	}
	for _, c := range claims {
		if _, err := w.client.CoreV1().PersistentVolumeClaims(workloadNS).Create(ctx, c, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	keepers := [][2]string{{w.keeperPod(), w.keeperClaim()}, {w.iscsiKeeper(), w.iscsiKeeper()}}
	errs := make(chan error, len(keepers))
	for _, k := range keepers {
		go func() { errs <- w.startKeeper(ctx, k[0], k[1]) }()
	}
	for range keepers {
		if err := <-errs; err != nil {
			return err
		}
	}
	go w.churn(ctx)
	return pollUntil(ctx, 5*time.Minute, func() (bool, string, error) {
		cycles := w.cyclesIn(time.Time{}, time.Now())
		if len(cycles) == 0 {
			return false, "no churn cycle yet", nil
		}
		if cycles[0].Err != "" {
			return false, "", fmt.Errorf("first churn cycle on %s failed: %s", w.node.Name, cycles[0].Err)
		}
		return true, "", nil
	})
}

// workloadPod is a pod on node running the workload program on a claim.
func workloadPod(ns, name, node, claim string, args ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "e2e-workload"}},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](5),
			Containers: []corev1.Container{{
				Name:            "workload",
				Image:           toolsImage,
				ImagePullPolicy: corev1.PullNever,
				Command:         append([]string{"/workload"}, args...),
				Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{
					FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"},
				}}},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
			}}},
		},
	}
}

// startKeeper creates a keeper pod and waits until it runs.
func (w *workload) startKeeper(ctx context.Context, name, claimName string) error {
	p := workloadPod(workloadNS, name, w.node.Name, claimName, "keep", "--dir=/data", "--interval=200ms")
	if _, err := w.client.CoreV1().Pods(workloadNS).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		return err
	}
	return waitPod(ctx, w.client, workloadNS, name, 5*time.Minute, podReady)
}

// checkISCSIKeeper reports the iSCSI keeper's problems: not Ready, or
// restarted (a failed write, a changed device, a missing seed).
func (w *workload) checkISCSIKeeper(ctx context.Context) []string {
	p, err := w.client.CoreV1().Pods(workloadNS).Get(ctx, w.iscsiKeeper(), metav1.GetOptions{})
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, cs := range p.Status.ContainerStatuses {
		if cs.RestartCount > 0 {
			out = append(out, fmt.Sprintf("%s restarted %d times", p.Name, cs.RestartCount))
		}
	}
	if !podReady(p) {
		out = append(out, p.Name+" is not Ready")
	}
	return out
}

// churn runs churn cycles until ctx ends.
func (w *workload) churn(ctx context.Context) {
	for n := 1; ctx.Err() == nil && !w.isStopped(); n++ {
		c := w.churnOnce(ctx, fmt.Sprintf("churn-%s-%04d", w.node.Name, n))
		w.mu.Lock()
		w.cycles = append(w.cycles, c)
		w.mu.Unlock()
		if c.Err != "" {
			w.obs.add("churn", "%s FAILED: %s", c.Pod, c.Err)
		} else {
			w.obs.add("churn", "%s mounted after %s, unmounted and gone after %s", c.Pod,
				c.Running.Sub(c.Created).Round(time.Millisecond), c.Gone.Sub(c.Deleted).Round(time.Millisecond))
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

const churnStepTimeout = 3 * time.Minute

func (w *workload) churnOnce(ctx context.Context, name string) churnCycle {
	c := churnCycle{Pod: name, Created: time.Now()}
	pods := w.client.CoreV1().Pods(workloadNS)
	if _, err := pods.Create(ctx, workloadPod(workloadNS, name, w.node.Name, w.churnClaim(), "churn", "--dir=/data"), metav1.CreateOptions{}); err != nil {
		c.Err = err.Error()
		return c
	}
	err := waitPod(ctx, w.client, workloadNS, name, churnStepTimeout, podReady)
	c.Running = time.Now()
	if err != nil {
		c.Err, c.Timeout = "not running: "+err.Error(), true
	}
	c.Deleted = time.Now()
	if err := pods.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		c.Err += "; delete: " + err.Error()
	}
	// The kubelet removes a pod from the API only once its volumes are
	// unmounted, so "gone" means unpublished (and unstaged).
	if err := waitPodGone(ctx, w.client, workloadNS, name, churnStepTimeout); err != nil {
		c.Err += "; not gone: " + err.Error()
		c.Timeout = true
	}
	c.Gone = time.Now()
	return c
}

// stop ends the churn after the cycle under way.
func (w *workload) stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
}

func (w *workload) isStopped() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stopped
}

// cyclesIn returns the churn cycles that overlap a window.
func (w *workload) cyclesIn(from, to time.Time) []churnCycle {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []churnCycle
	for _, c := range w.cycles {
		if c.Gone.After(from) && c.Created.Before(to) {
			out = append(out, c)
		}
	}
	return out
}

// keeperReport is the keeper's state and its data as the storage holds it.
type keeperReport struct {
	Ready      bool
	Restarts   int32
	Lines      int
	LastSeq    int
	LastWrite  time.Time
	MaxStall   time.Duration // longest time between two journal lines
	SeedIntact bool
	Problems   []string
}

// checkKeeper reads the keeper's volume from the simulator's side (the
// directory that backs the ONTAP volume, found through the data plane the
// NFS shim uses) and checks the seed and the journal sequence.
func (w *workload) checkKeeper(ctx context.Context) (keeperReport, error) {
	var r keeperReport
	p, err := w.client.CoreV1().Pods(workloadNS).Get(ctx, w.keeperPod(), metav1.GetOptions{})
	if err != nil {
		return r, err
	}
	r.Ready = podReady(p)
	for _, cs := range p.Status.ContainerStatuses {
		r.Restarts += cs.RestartCount
	}
	pvc, err := w.client.CoreV1().PersistentVolumeClaims(workloadNS).Get(ctx, w.keeperClaim(), metav1.GetOptions{})
	if err != nil {
		return r, err
	}
	dir, err := volumeDir(ctx, w.client, w.sim, pvc.Spec.VolumeName, w.node.IP)
	if err != nil {
		return r, err
	}
	seed, err := os.ReadFile(filepath.Join(dir, "seed"))
	if err != nil {
		return r, err
	}
	want, err := os.ReadFile(filepath.Join(dir, "seed.sha256"))
	if err != nil {
		return r, err
	}
	sum := sha256.Sum256(seed)
	r.SeedIntact = hex.EncodeToString(sum[:]) == strings.TrimSpace(string(want))
	if !r.SeedIntact {
		r.Problems = append(r.Problems, "seed does not match its checksum")
	}
	f, err := os.Open(filepath.Join(dir, "journal"))
	if err != nil {
		return r, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var prev time.Time
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 {
			r.Problems = append(r.Problems, fmt.Sprintf("torn journal line %q", sc.Text()))
			continue
		}
		seq, err1 := strconv.Atoi(fields[0])
		at, err2 := time.Parse(time.RFC3339Nano, fields[1])
		if err1 != nil || err2 != nil {
			r.Problems = append(r.Problems, fmt.Sprintf("bad journal line %q", sc.Text()))
			continue
		}
		r.Lines++
		if seq != r.LastSeq+1 {
			r.Problems = append(r.Problems, fmt.Sprintf("journal jumps from %d to %d", r.LastSeq, seq))
		}
		r.LastSeq = seq
		if !prev.IsZero() && at.Sub(prev) > r.MaxStall {
			r.MaxStall = at.Sub(prev)
		}
		prev, r.LastWrite = at, at
	}
	if err := sc.Err(); err != nil {
		return r, err
	}
	if r.Restarts > 0 {
		r.Problems = append(r.Problems, fmt.Sprintf("keeper restarted %d times", r.Restarts))
	}
	if !r.Ready {
		r.Problems = append(r.Problems, "keeper is not Ready")
	}
	return r, nil
}

// volumeDir asks the simulator's data plane where an NFS PV's data lives,
// with the server and path csi-attacher stored for kubelet, for a client
// the export admits.
func volumeDir(ctx context.Context, client kubernetes.Interface, sim *http.Client, pvName, clientIP string) (string, error) {
	vas, err := client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	for _, va := range vas.Items {
		if va.Spec.Source.PersistentVolumeName == nil || *va.Spec.Source.PersistentVolumeName != pvName || !va.Status.Attached {
			continue
		}
		md := va.Status.AttachmentMetadata
		q := url.Values{"server": {md["nfsServerIp"]}, "client": {clientIP}, "path": {md["nfsPath"]}}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://sim/sim/nfs/export?"+q.Encode(), nil)
		if err != nil {
			return "", err
		}
		resp, err := sim.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("simulator: %s: %s", resp.Status, body)
		}
		var exp struct {
			Directory string `json:"directory"`
		}
		if err := json.Unmarshal(body, &exp); err != nil {
			return "", err
		}
		return exp.Directory, nil
	}
	return "", fmt.Errorf("no attached VolumeAttachment for %s", pvName)
}

// waitPod waits until cond holds for the pod.
func waitPod(ctx context.Context, client kubernetes.Interface, ns, name string, timeout time.Duration, cond func(*corev1.Pod) bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last string
	for {
		p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			if cond(p) {
				return nil
			}
			last = podState(p)
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pod %s/%s: %w (last: %s)", ns, name, ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func waitPodGone(ctx context.Context, client kubernetes.Interface, ns, name string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		_, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pod %s/%s still there: %w", ns, name, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
