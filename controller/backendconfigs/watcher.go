// Package backendconfigs turns Trident's TridentBackendConfig resources
// (tridentbackendconfigs.trident.netapp.io/v1, in the controller's
// namespace) into the controller's backends, at run time: a resource
// created, changed, deleted or whose credential Secret changed adds,
// rebuilds or removes a backend, and its status says how that went, with
// Trident's phases and messages.
//
// Secrets are read with get only, when a resource is reconciled and on every
// resync: that is what least-privilege RBAC allows for Secrets whose names
// users choose (no list or watch on every Secret of the namespace), and it
// notices a rotated password within one resync period.
package backendconfigs

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/workqueue"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap"
	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
)

// GVR is the TridentBackendConfig resource.
var GVR = schema.GroupVersionResource{Group: "trident.netapp.io", Version: "v1", Resource: "tridentbackendconfigs"}

var secretsGVR = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

// Finalizer is Trident's: it lets the controller see a deletion and keep
// the resource while its backend still holds volumes.
const Finalizer = "trident.netapp.io"

// Defaults of Config.
const (
	DefaultResync       = time.Minute
	DefaultCheckTimeout = 30 * time.Second
	// drainRecheck is how soon a backend kept for its volumes is looked at
	// again after its resource was deleted.
	drainRecheck = 30 * time.Second
)

var (
	reconcilesTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: "ontap_csi",
		Subsystem: "backend_configs",
		Name:      "reconciles_total",
		Help:      "TridentBackendConfig reconciles by result (ok, retry).",
	}, []string{"result"})
	loadedGauge = promauto.NewGauge(prometheus.GaugeOpts{
		Namespace: "ontap_csi",
		Subsystem: "backend_configs",
		Name:      "backends_loaded",
		Help:      "Backends currently served from TridentBackendConfigs.",
	})
)

// Config configures a Watcher.
type Config struct {
	// Dynamic reads and updates TridentBackendConfigs and reads the
	// credential Secrets.
	Dynamic dynamic.Interface
	// Namespace is the controller's: Trident only reads TridentBackendConfigs,
	// and their Secrets, in its own namespace.
	Namespace string
	// NewBackend builds a backend from a parsed configuration; nil means
	// ontap.NewBackend without options.
	NewBackend func(*config.Backend) (backends.Backend, error)
	// ReservedNames are backend names taken by --backend-config files.
	ReservedNames []string
	// Resync is how often every resource is reconciled again, which is when
	// a changed Secret is noticed (DefaultResync).
	Resync time.Duration
	// CheckTimeout bounds the first contact with ONTAP that a new or
	// changed configuration must pass (DefaultCheckTimeout).
	CheckTimeout time.Duration
	// Checked, if set, is told the outcome of that contact (nil: ONTAP
	// accepted the configuration), by backend name; Forgotten, when the
	// resource whose backend it was goes or names another backend.
	Checked   func(backend, driver string, err error)
	Forgotten func(backend string)
	// Served, if set, is called after the backends Backends returns
	// changed: one loaded, replaced or removed.
	Served func()
}

// Watcher serves the backends of the TridentBackendConfigs in a namespace.
// It implements controller.BackendSource.
type Watcher struct {
	cfg     Config
	client  dynamic.ResourceInterface // TridentBackendConfigs
	secrets dynamic.ResourceInterface
	queue   workqueue.TypedRateLimitingInterface[string] // resource names
	log     *logrus.Entry
	synced  atomic.Bool // the first list has completed

	mu      sync.RWMutex
	objects map[string]*unstructured.Unstructured // the resources, by name, as last listed or watched
	loaded  map[string]*loaded                    // what each resource is served as

	// Owned by the worker: the last failure logged per resource, so that a
	// resource that stays broken is logged once, not every resync; and the
	// backend name each resource's last check was reported under.
	lastFailure map[string]string
	reported    map[string]string
}

// loaded is the backend a resource is served as.
type loaded struct {
	uid    types.UID // a resource deleted and created again starts over
	driver backends.Backend
	// served is driver, or a wrapper refusing new volumes once the
	// resource is being deleted.
	served      backends.Backend
	fingerprint [32]byte
}

// New returns a Watcher; Run starts it.
func New(cfg Config) (*Watcher, error) {
	if cfg.Dynamic == nil {
		return nil, errors.New("backendconfigs: a dynamic client is required")
	}
	if cfg.Namespace == "" {
		return nil, errors.New("backendconfigs: no namespace")
	}
	if cfg.NewBackend == nil {
		cfg.NewBackend = func(c *config.Backend) (backends.Backend, error) { return ontap.NewBackend(c, ontap.Options{}) }
	}
	if cfg.Resync <= 0 {
		cfg.Resync = DefaultResync
	}
	if cfg.CheckTimeout <= 0 {
		cfg.CheckTimeout = DefaultCheckTimeout
	}
	return &Watcher{
		cfg:     cfg,
		client:  cfg.Dynamic.Resource(GVR).Namespace(cfg.Namespace),
		secrets: cfg.Dynamic.Resource(secretsGVR).Namespace(cfg.Namespace),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, 5*time.Minute),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "tridentbackendconfigs"}),
		log:         logrus.WithFields(logrus.Fields{"component": "backendconfigs", "namespace": cfg.Namespace}),
		objects:     map[string]*unstructured.Unstructured{},
		loaded:      map[string]*loaded{},
		lastFailure: map[string]string{},
		reported:    map[string]string{},
	}, nil
}

// Run lists and watches TridentBackendConfigs and keeps the backends in
// step until ctx ends.
func (w *Watcher) Run(ctx context.Context) {
	defer w.queue.ShutDown()
	w.log.Info("watching TridentBackendConfigs")
	go w.follow(ctx)
	go w.resync(ctx)
	// One worker: reconciles are rare, and backend names are checked for
	// clashes without racing another reconcile.
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		for w.processNext(ctx) {
		}
	}, time.Second)
	<-ctx.Done()
}

// follow keeps objects current with a list and a watch, listing again
// whenever the watch ends. (client-go's informer would pull in a module
// outside go.mod.)
func (w *Watcher) follow(ctx context.Context) {
	pause := time.Second
	missing := false
	for ctx.Err() == nil {
		err := w.listAndWatch(ctx)
		if ctx.Err() != nil {
			return
		}
		switch {
		case apierrors.IsNotFound(err):
			// The CRD is not installed: there are no TridentBackendConfigs,
			// which is a complete answer. Look again now and then.
			if !missing {
				w.log.Info("the TridentBackendConfig CRD is not installed; no backends come from TridentBackendConfigs until it is")
			}
			missing = true
			w.setObjects(map[string]*unstructured.Unstructured{})
			pause = time.Minute
		case err != nil:
			w.log.WithError(err).Warn("listing or watching TridentBackendConfigs failed; retrying")
			pause = min(2*pause, time.Minute)
		default:
			pause = time.Second // the server ended the watch; resume
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
	}
}

func (w *Watcher) listAndWatch(ctx context.Context) error {
	list, err := w.client.List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	listed := make(map[string]*unstructured.Unstructured, len(list.Items))
	for i := range list.Items {
		listed[list.Items[i].GetName()] = &list.Items[i]
	}
	w.setObjects(listed)

	wi, err := w.client.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion(), AllowWatchBookmarks: true})
	if err != nil {
		return err
	}
	defer wi.Stop()
	for ev := range wi.ResultChan() {
		switch ev.Type {
		case watch.Added, watch.Modified, watch.Deleted:
			obj, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			name := obj.GetName()
			w.mu.Lock()
			old := w.objects[name]
			if ev.Type == watch.Deleted {
				delete(w.objects, name)
			} else {
				w.objects[name] = obj
			}
			w.mu.Unlock()
			if ev.Type != watch.Modified || old == nil || needsReconcile(old, obj) {
				w.queue.Add(name)
			}
		case watch.Error:
			return apierrors.FromObject(ev.Object)
		}
	}
	return nil
}

// setObjects replaces the known resources with a fresh list and queues
// what changed, including the ones gone.
func (w *Watcher) setObjects(listed map[string]*unstructured.Unstructured) {
	w.mu.Lock()
	for name, old := range w.objects {
		if n, ok := listed[name]; !ok || needsReconcile(old, n) {
			w.queue.Add(name)
		}
	}
	for name := range listed {
		if _, ok := w.objects[name]; !ok {
			w.queue.Add(name)
		}
	}
	w.objects = listed
	w.mu.Unlock()
	w.synced.Store(true)
}

// needsReconcile skips the updates that only our own status writes cause.
func needsReconcile(o, n *unstructured.Unstructured) bool {
	if o.GetResourceVersion() == n.GetResourceVersion() {
		return false
	}
	return n.GetDeletionTimestamp() != nil || o.GetUID() != n.GetUID() ||
		!slices.Equal(o.GetFinalizers(), n.GetFinalizers()) ||
		!equality.Semantic.DeepEqual(o.Object["spec"], n.Object["spec"])
}

// resync reconciles every resource each Resync period: Secrets are not
// watched, so this is when a rotated one is read.
func (w *Watcher) resync(ctx context.Context) {
	t := time.NewTicker(w.cfg.Resync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.mu.RLock()
			for name := range w.objects {
				w.queue.Add(name)
			}
			w.mu.RUnlock()
		}
	}
}

// object returns the resource as last seen, or nil.
func (w *Watcher) object(name string) *unstructured.Unstructured {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if o := w.objects[name]; o != nil {
		return o.DeepCopy()
	}
	return nil
}

func (w *Watcher) processNext(ctx context.Context) bool {
	name, shutdown := w.queue.Get()
	if shutdown {
		return false
	}
	defer w.queue.Done(name)
	if err := w.reconcile(ctx, name); err != nil {
		reconcilesTotal.WithLabelValues("retry").Inc()
		w.log.WithError(err).WithField("tridentBackendConfig", name).Debug("reconcile will be retried")
		w.queue.AddRateLimited(name)
		return true
	}
	reconcilesTotal.WithLabelValues("ok").Inc()
	w.queue.Forget(name)
	return true
}

// Backends implements controller.BackendSource: the loaded backends, by
// name. The error names the resources that were bound (by us or by
// Trident, so their backend may hold volumes) but are not loaded now.
func (w *Watcher) Backends() ([]backends.Backend, error) {
	if !w.synced.Load() {
		return nil, errors.New("TridentBackendConfigs are not listed yet")
	}
	w.mu.RLock()
	out := make([]backends.Backend, 0, len(w.loaded))
	for _, l := range w.loaded {
		out = append(out, l.served)
	}
	var missing []string
	for _, u := range w.objects {
		if u.GetDeletionTimestamp() != nil || !mayHoldVolumes(statusOf(u).Phase) {
			continue
		}
		if l := w.loaded[u.GetName()]; l == nil || l.uid != u.GetUID() {
			missing = append(missing, u.GetName())
		}
	}
	w.mu.RUnlock()
	slices.SortFunc(out, func(a, b backends.Backend) int { return strings.Compare(a.Name(), b.Name()) })
	if len(missing) > 0 {
		slices.Sort(missing)
		return out, fmt.Errorf("TridentBackendConfig %s was bound but its backend is not loaded; see its status", strings.Join(missing, ", "))
	}
	return out, nil
}

// current returns what resource name is served as, if it is the same
// resource (uid).
func (w *Watcher) current(name string, uid types.UID) *loaded {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if l := w.loaded[name]; l != nil && l.uid == uid {
		return l
	}
	return nil
}

// servesOther reports whether name is served from an earlier resource of
// that name.
func (w *Watcher) servesOther(name string, uid types.UID) bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	l := w.loaded[name]
	return l != nil && l.uid != uid
}

// set serves resource name as l, releasing the backend it replaces.
func (w *Watcher) set(name string, l *loaded) {
	w.mu.Lock()
	old := w.loaded[name]
	w.loaded[name] = l
	loadedGauge.Set(float64(len(w.loaded)))
	w.mu.Unlock()
	if old != nil && old.driver != l.driver {
		release(old.driver)
	}
	w.served()
}

func (w *Watcher) unload(name, why string) {
	w.mu.Lock()
	l := w.loaded[name]
	delete(w.loaded, name)
	loadedGauge.Set(float64(len(w.loaded)))
	w.mu.Unlock()
	delete(w.lastFailure, name)
	w.report(name, "", "", nil)
	if l != nil {
		w.served()
		release(l.driver)
		w.log.WithFields(logrus.Fields{"tridentBackendConfig": name, "backend": l.driver.Name(), "reason": why}).
			Info("backend removed; its volumes on ONTAP are untouched")
	}
}

// served tells Config.Served that Backends changed.
func (w *Watcher) served() {
	if w.cfg.Served != nil {
		w.cfg.Served()
	}
}

// report passes a resource's check on (backend "": the resource's backend
// is gone), forgetting the backend it reported before under another name.
func (w *Watcher) report(resource, backend, driver string, err error) {
	if old := w.reported[resource]; old != "" && old != backend {
		delete(w.reported, resource)
		if w.cfg.Forgotten != nil {
			w.cfg.Forgotten(old)
		}
	}
	if backend == "" {
		return
	}
	w.reported[resource] = backend
	if w.cfg.Checked != nil {
		w.cfg.Checked(backend, driver, err)
	}
}

// release lets a backend that no longer serves close its idle connections
// (backends.Backend); calls still in flight on it finish.
func release(b backends.Backend) {
	if c, ok := b.(io.Closer); ok {
		_ = c.Close()
	}
}

// nameTaken returns who else serves a backend named backend, or "".
func (w *Watcher) nameTaken(backend, resource string) string {
	if slices.Contains(w.cfg.ReservedNames, backend) {
		return "a --backend-config file"
	}
	w.mu.RLock()
	defer w.mu.RUnlock()
	for name, l := range w.loaded {
		if name != resource && l.driver.Name() == backend {
			return "TridentBackendConfig " + name
		}
	}
	return ""
}

// secret reads a credential Secret of the namespace.
func (w *Watcher) secret(ctx context.Context, name string) (map[string][]byte, error) {
	s, err := w.secrets.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("Secret %q in namespace %q: %w", name, w.cfg.Namespace, errNoSecret)
	}
	if err != nil {
		return nil, fmt.Errorf("Secret %q: %w", name, err)
	}
	data, err := secretData(s)
	if err != nil {
		return nil, fmt.Errorf("Secret %q: %w", name, err)
	}
	return data, nil
}

// secretData decodes a Secret's data, which the API serves base64-encoded.
// Errors name keys only, never values.
func secretData(s *unstructured.Unstructured) (map[string][]byte, error) {
	enc, ok := s.Object["data"].(map[string]any)
	if !ok && s.Object["data"] != nil {
		return nil, errors.New("data is not an object")
	}
	data := make(map[string][]byte, len(enc))
	for k, v := range enc {
		str, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("data key %q is not a string", k)
		}
		b, err := base64.StdEncoding.DecodeString(str)
		if err != nil {
			return nil, fmt.Errorf("data key %q: %w", k, err)
		}
		data[k] = b
	}
	return data, nil
}

// draining serves a backend whose resource is being deleted while it still
// holds volumes: those can still be published, expanded and deleted, but
// no new volume goes there.
type draining struct{ backends.Backend }

func (d draining) Pools(context.Context) ([]backends.Pool, error) { return nil, nil }

func (d draining) CreateVolume(context.Context, *backends.CreateRequest) (*backends.Volume, error) {
	return nil, backends.Errorf(backends.ErrUnavailable, "backend %s is being deleted: it takes no new volumes", d.Name())
}
