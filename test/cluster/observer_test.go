package cluster_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/ontap-csi/ontap-csi/test/cluster/localcluster"
)

// What the observer records, and how a recorded kubelet failure is judged.
const (
	// csinodeSamplePeriod is how often each sampler reads CSINode; the
	// issue asks for at most 100 ms. A watch on CSINode runs beside them
	// and sees every change, however short.
	csinodeSamplePeriod = 50 * time.Millisecond
	// maxSampleInterval is the longest time allowed between two answered
	// CSINode reads in a scenario: the "sampled ≤ 100 ms". A
	// longer stretch fails the scenario, since a gap could hide in it.
	maxSampleInterval = 100 * time.Millisecond

	// unregisteredMessage is what kubelet says when a volume operation
	// finds no registered driver: the seed failure.
	unregisteredMessage = "not found in the list of registered CSI drivers"
)

// failureClass sorts a failed kubelet volume operation by cause.
type failureClass string

const (
	// classUnregistered: the driver was not registered with kubelet. Every
	// such failure fails the test.
	classUnregistered failureClass = "driver not registered"
	// classNotServed: the driver was registered but nothing answered on its
	// endpoint (between a SIGKILL and the restart, or between an old pod
	// leaving and a new one arriving).
	classNotServed failureClass = "endpoint not served"
	classOther     failureClass = "other"
)

func classify(msg string) failureClass {
	switch {
	case strings.Contains(msg, unregisteredMessage):
		return classUnregistered
	case strings.Contains(msg, "connection refused"), strings.Contains(msg, "code = Unavailable"),
		strings.Contains(msg, "no such file or directory") && strings.Contains(msg, ".sock"),
		strings.Contains(msg, "context deadline exceeded") && strings.Contains(msg, "csi"):
		return classNotServed
	}
	return classOther
}

// record is one line of the timeline.
type record struct {
	At     time.Time
	Source string
	Text   string
	// Class is set on failed kubelet volume operations.
	Class failureClass
}

// sample is one CSINode read.
type sample struct {
	At      time.Time
	Present bool
	Err     bool
}

// gap is a stretch of time in which CSINode lacked the driver.
type gap struct {
	From, To time.Time
	By       string // "sample" or "watch"
}

// observer watches the cluster through the API and the node's files, for
// the whole test; each scenario reads its own time window.
type observer struct {
	client kubernetes.Interface
	driver string

	mu      sync.Mutex
	records []record
	samples []sample
	gaps    []gap
	// watchPresent is the driver's presence as last seen by the watch;
	// watchSince is when it last changed, zero until the driver has been
	// seen at least once (a driver not yet installed is no gap).
	watchPresent bool
	watchSince   time.Time
	eventCounts  map[string]int32
	// firstPresent is the first sample that found the driver: absence
	// before it is "not installed yet", not a gap.
	firstPresent time.Time
}

func newObserver(client kubernetes.Interface, driver string) *observer {
	return &observer{client: client, driver: driver, eventCounts: map[string]int32{}}
}

func (o *observer) add(source, format string, args ...any) {
	o.addAt(time.Now(), source, "", format, args...)
}

func (o *observer) addAt(at time.Time, source string, class failureClass, format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.records = append(o.records, record{At: at, Source: source, Text: fmt.Sprintf(format, args...), Class: class})
}

// start runs every watcher until ctx ends.
func (o *observer) start(ctx context.Context, c *localcluster.Cluster, namespaces []string) {
	for i := 0; i < csinodeSamplers; i++ {
		go func(i int) {
			time.Sleep(time.Duration(i) * csinodeSamplePeriod / csinodeSamplers)
			o.sampleCSINode(ctx)
		}(i)
	}
	go o.watchLoop(ctx, "csinode", o.watchCSINode)
	go o.watchLoop(ctx, "events", o.watchEvents)
	for _, ns := range namespaces {
		go o.watchLoop(ctx, "pods/"+ns, func(ctx context.Context) error { return o.watchPods(ctx, ns) })
	}
	go o.tailKubelet(ctx, c.Kubelet.Log)
	go o.pollNodeFiles(ctx, c)
}

func (o *observer) driverIn(n *storagev1.CSINode) bool {
	for _, d := range n.Spec.Drivers {
		if d.Name == o.driver {
			return true
		}
	}
	return false
}

// csinodeSamplers read CSINode concurrently, staggered, so that one slow
// API round trip on a loaded machine does not leave a hole in the samples.
const csinodeSamplers = 3

func (o *observer) sampleCSINode(ctx context.Context) {
	t := time.NewTicker(csinodeSamplePeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		n, err := o.client.StorageV1().CSINodes().Get(rctx, localcluster.NodeName, metav1.GetOptions{})
		cancel()
		// The API server read the object somewhere between the request
		// and the answer; the midpoint is the fairest time to give it.
		s := sample{At: start.Add(time.Since(start) / 2)}
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			s.Err = true
		default:
			s.Present = o.driverIn(n)
		}
		o.mu.Lock()
		o.samples = append(o.samples, s)
		if s.Present && (o.firstPresent.IsZero() || s.At.Before(o.firstPresent)) {
			o.firstPresent = s.At
		}
		o.mu.Unlock()
	}
}

// watchLoop restarts a watch whenever it ends, until ctx is done.
func (o *observer) watchLoop(ctx context.Context, name string, f func(context.Context) error) {
	for ctx.Err() == nil {
		if err := f(ctx); err != nil && ctx.Err() == nil {
			o.add("observer", "%s watch: %v; restarting", name, err)
			time.Sleep(500 * time.Millisecond)
		}
	}
}

func (o *observer) watchCSINode(ctx context.Context) error {
	sel := fields.OneTermEqualSelector("metadata.name", localcluster.NodeName).String()
	list, err := o.client.StorageV1().CSINodes().List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return err
	}
	present := false
	for i := range list.Items {
		present = o.driverIn(&list.Items[i])
	}
	o.setWatchPresence(time.Now(), present, "list")
	w, err := o.client.StorageV1().CSINodes().Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.ResourceVersion})
	if err != nil {
		return err
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Added, watch.Modified:
			n := ev.Object.(*storagev1.CSINode)
			o.setWatchPresence(time.Now(), o.driverIn(n), "rv "+n.ResourceVersion)
		case watch.Deleted:
			o.setWatchPresence(time.Now(), false, "CSINode deleted")
		case watch.Error:
			return fmt.Errorf("%v", apierrors.FromObject(ev.Object))
		}
	}
	return nil
}

func (o *observer) setWatchPresence(at time.Time, present bool, why string) {
	o.mu.Lock()
	was, since := o.watchPresent, o.watchSince
	o.watchPresent = present
	if was != present {
		o.watchSince = at
	}
	if !was && !present {
		o.mu.Unlock()
		return
	}
	if was && !present {
		o.mu.Unlock()
		o.addAt(at, "csinode", "", "driver %s REMOVED from CSINode (%s)", o.driver, why)
		return
	}
	if !was && present {
		if !since.IsZero() {
			o.gaps = append(o.gaps, gap{From: since, To: at, By: "watch"})
		}
		o.mu.Unlock()
		o.addAt(at, "csinode", "", "driver %s in CSINode (%s)", o.driver, why)
		return
	}
	o.mu.Unlock()
}

// watchEvents records the kubelet's and the attach/detach controller's
// volume events.
func (o *observer) watchEvents(ctx context.Context) error {
	w, err := o.client.CoreV1().Events("").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		e, ok := ev.Object.(*corev1.Event)
		if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified) {
			continue
		}
		key := string(e.UID)
		o.mu.Lock()
		prev := o.eventCounts[key]
		count := e.Count
		if count == 0 {
			count = 1
		}
		o.eventCounts[key] = count
		o.mu.Unlock()
		if count <= prev {
			continue
		}
		// Events carry whole seconds (LastTimestamp); the time the watch
		// delivered one orders it with the rest of the timeline.
		at := time.Now()
		if e.Type == corev1.EventTypeNormal && (e.Reason == "Pulled" || e.Reason == "Scheduled") {
			continue // every pod has them; they tell nothing here
		}
		obj := e.InvolvedObject.Kind + " " + e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name
		var class failureClass
		if e.Type == corev1.EventTypeWarning && strings.Contains(e.Reason, "Failed") &&
			(strings.Contains(e.Reason, "Mount") || strings.Contains(e.Reason, "Attach") || strings.Contains(e.Reason, "Map")) {
			class = classify(e.Message)
		}
		o.addAt(at, "event", class, "%s %s %s: %s", e.Type, e.Reason, obj, oneLine(e.Message))
	}
	return nil
}

// watchPods records pod phase, readiness and container state changes.
func (o *observer) watchPods(ctx context.Context, ns string) error {
	w, err := o.client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	defer w.Stop()
	last := map[string]string{}
	for ev := range w.ResultChan() {
		p, ok := ev.Object.(*corev1.Pod)
		if !ok {
			continue
		}
		if ev.Type == watch.Deleted {
			o.add("pod", "%s/%s deleted from the API", ns, p.Name)
			delete(last, p.Name)
			continue
		}
		state := podState(p)
		if last[p.Name] != state {
			last[p.Name] = state
			o.add("pod", "%s/%s %s", ns, p.Name, state)
		}
	}
	return nil
}

func podState(p *corev1.Pod) string {
	var b strings.Builder
	b.WriteString(string(p.Status.Phase))
	if p.DeletionTimestamp != nil {
		b.WriteString(" terminating")
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			b.WriteString(" ready")
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		fmt.Fprintf(&b, " %s[", cs.Name)
		switch {
		case cs.State.Running != nil:
			b.WriteString("running")
		case cs.State.Waiting != nil:
			b.WriteString("waiting:" + cs.State.Waiting.Reason)
		case cs.State.Terminated != nil:
			fmt.Fprintf(&b, "terminated:%s/%d", cs.State.Terminated.Reason, cs.State.Terminated.ExitCode)
		}
		if cs.RestartCount > 0 {
			fmt.Fprintf(&b, " restarts=%d", cs.RestartCount)
		}
		b.WriteString("]")
	}
	return b.String()
}

// kubeletFailure matches the kubelet's log lines for failed volume
// operations (nestedpendingoperations and the reconciler) and the
// registration handler's messages.
var (
	klogHeader     = regexp.MustCompile(`^([IWEF])(\d{2})(\d{2}) (\d{2}:\d{2}:\d{2}\.\d{6})\s`)
	kubeletVolFail = regexp.MustCompile(`(MountVolume\.\S+ failed|UnmountVolume\.\S+ failed|UnmountDevice failed|MapVolume\.\S+ failed|UnmapVolume\.\S+ failed|` + unregisteredMessage + `)`)
	kubeletRegLine = regexp.MustCompile(`(?i)register|validat`)
)

// tailKubelet follows the kubelet's log (across restarts, which append).
func (o *observer) tailKubelet(ctx context.Context, path string) {
	var f *os.File
	for f == nil {
		var err error
		if f, err = os.Open(path); err != nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}
	defer f.Close()
	// Skip what was logged before the observer started.
	_, _ = f.Seek(0, io.SeekEnd)
	r := bufio.NewReaderSize(f, 1<<20)
	var partial string
	for {
		line, err := r.ReadString('\n')
		if err == io.EOF {
			partial += line
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		if err != nil {
			o.add("observer", "kubelet log: %v", err)
			return
		}
		o.kubeletLine(partial + line)
		partial = ""
	}
}

func (o *observer) kubeletLine(line string) {
	m := klogHeader.FindStringSubmatch(line)
	if m == nil {
		return
	}
	at, err := time.ParseInLocation("2006 0102 15:04:05.000000", fmt.Sprintf("%d %s%s %s", time.Now().Year(), m[2], m[3], m[4]), time.Local)
	if err != nil {
		return
	}
	switch {
	case (m[1] == "E" || m[1] == "W") && kubeletVolFail.MatchString(line):
		o.addAt(at, "kubelet", classify(line), "%s", trimKlog(line))
	case strings.Contains(line, o.driver) && kubeletRegLine.MatchString(line):
		o.addAt(at, "kubelet", "", "%s", trimKlog(line))
	}
}

// trimKlog drops the klog header and shortens the line for the report.
func trimKlog(line string) string {
	if i := strings.Index(line, "] "); i >= 0 {
		line = line[i+2:]
	}
	return oneLine(line)
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 400 {
		s = string(r[:400]) + "…"
	}
	return s
}

// pollNodeFiles records the registration sockets in kubelet's
// plugins_registry and the node lease (docs/design/registration.md §4) as they change.
func (o *observer) pollNodeFiles(ctx context.Context, c *localcluster.Cluster) {
	regDir := c.NodePath("/var/lib/kubelet/plugins_registry")
	lease := c.NodePath(filepath.Join("/var/lib/kubelet/plugins", o.driver, "lease.json"))
	var lastSockets []string
	lastLease := ""
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		entries, _ := os.ReadDir(regDir)
		var socks []string
		for _, e := range entries {
			socks = append(socks, e.Name())
		}
		sort.Strings(socks)
		if strings.Join(socks, " ") != strings.Join(lastSockets, " ") {
			added, removed := diff(lastSockets, socks)
			o.add("node", "plugins_registry: +%v -%v", added, removed)
			lastSockets = socks
		}
		if b, err := os.ReadFile(lease); err == nil {
			var l struct {
				Generation uint64 `json:"generation"`
				Phase      string `json:"phase"`
				Holder     struct {
					Pod string `json:"pod"`
					PID int    `json:"pid"`
				} `json:"holder"`
			}
			if json.Unmarshal(b, &l) == nil {
				s := fmt.Sprintf("generation %d held by %s (pid %d), %s", l.Generation, l.Holder.Pod, l.Holder.PID, l.Phase)
				if s != lastLease {
					o.add("node", "lease: %s", s)
					lastLease = s
				}
			}
		}
	}
}

func diff(before, after []string) (added, removed []string) {
	for _, s := range after {
		if !hasString(before, s) {
			added = append(added, s)
		}
	}
	for _, s := range before {
		if !hasString(after, s) {
			removed = append(removed, s)
		}
	}
	return added, removed
}

// window is what the observer saw between two instants.
type window struct {
	From, To time.Time
	Records  []record
	// Samples and the longest stretch between two successful samples.
	Samples, SampleErrors int
	MaxSampleInterval     time.Duration
	// Gaps: absences of the driver from CSINode, by sample and by watch.
	Gaps []gap
	// Failures by class.
	Failures map[failureClass]int
}

func (o *observer) window(from, to time.Time) window {
	o.mu.Lock()
	defer o.mu.Unlock()
	w := window{From: from, To: to, Failures: map[failureClass]int{}}
	for _, r := range o.records {
		if !r.At.Before(from) && !r.At.After(to) {
			w.Records = append(w.Records, r)
			if r.Class != "" {
				w.Failures[r.Class]++
			}
		}
	}
	sort.SliceStable(w.Records, func(i, j int) bool { return w.Records[i].At.Before(w.Records[j].At) })
	samples := make([]sample, 0, len(o.samples))
	for _, s := range o.samples {
		if !s.At.Before(from) && !s.At.After(to) {
			samples = append(samples, s)
		}
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i].At.Before(samples[j].At) })
	var lastOK time.Time
	var absentSince time.Time
	for _, s := range samples {
		w.Samples++
		if s.Err {
			w.SampleErrors++
			continue
		}
		if !lastOK.IsZero() && s.At.Sub(lastOK) > w.MaxSampleInterval {
			w.MaxSampleInterval = s.At.Sub(lastOK)
		}
		lastOK = s.At
		if !s.Present && (o.firstPresent.IsZero() || s.At.Before(o.firstPresent)) {
			continue // not installed yet
		}
		switch {
		case !s.Present && absentSince.IsZero():
			absentSince = s.At
		case s.Present && !absentSince.IsZero():
			w.Gaps = append(w.Gaps, gap{From: absentSince, To: s.At, By: "sample"})
			absentSince = time.Time{}
		}
	}
	if !absentSince.IsZero() {
		w.Gaps = append(w.Gaps, gap{From: absentSince, To: to, By: "sample (still absent)"})
	}
	for _, g := range o.gaps {
		if g.To.After(from) && g.From.Before(to) {
			w.Gaps = append(w.Gaps, g)
		}
	}
	if !o.watchPresent && !o.watchSince.IsZero() && o.watchSince.Before(to) {
		w.Gaps = append(w.Gaps, gap{From: o.watchSince, To: to, By: "watch (still absent)"})
	}
	return w
}
