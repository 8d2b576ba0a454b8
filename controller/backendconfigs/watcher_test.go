package backendconfigs

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap"
	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/backends/ontap/rest"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

const (
	ns        = "trident"
	password1 = "first-Passw0rd"
	password2 = "rotated-Passw0rd"
)

// logs captures every log line of the test, to check that no credential
// ever reaches one.
type logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

type env struct {
	t       *testing.T
	dataDir string
	addr    string // the simulator's host:port, kept across restarts
	sim     *ontapsim.Simulator
	dyn     *dynamicfake.FakeDynamicClient
	w       *Watcher
	logs    *logs

	mu     sync.Mutex
	built  map[string][]*closeCounter // by backend name, in order
	checks []string                   // Checked and Forgotten calls, in order
	served [][]string                 // what Backends returned at each Served call
}

func (e *env) note(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.checks = append(e.checks, s)
}

func (e *env) noted() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.checks)
}

// closeCounter is a backend that counts its Close calls.
type closeCounter struct {
	backends.Backend
	closes atomic.Int32
}

func (c *closeCounter) Close() error {
	c.closes.Add(1)
	return c.Backend.(io.Closer).Close()
}

func closes(b backends.Backend) int32 { return b.(*closeCounter).closes.Load() }

func (e *env) builtBackends(name string) []*closeCounter {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.built[name])
}

func newEnv(t *testing.T) *env {
	e := &env{t: t, dataDir: t.TempDir(), logs: &logs{}, built: map[string][]*closeCounter{}}
	e.startSim(password1, "127.0.0.1:0")
	e.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{GVR: "TridentBackendConfigList", secretsGVR: "SecretList"},
		secret("nas-creds", password1))

	logrus.SetOutput(e.logs)
	logrus.SetLevel(logrus.DebugLevel)
	t.Cleanup(func() { logrus.SetOutput(logOutput); logrus.SetLevel(logrus.InfoLevel) })

	w, err := New(Config{
		Dynamic: e.dyn, Namespace: ns,
		NewBackend: func(c *config.Backend) (backends.Backend, error) {
			b, err := ontap.NewBackend(c, ontap.Options{Client: func(cc *rest.ClientConfig) {
				cc.Scheme = "http" // the simulator without TLS
				cc.MaxAttempts, cc.RetryBaseDelay, cc.RetryMaxDelay = 2, time.Millisecond, 10*time.Millisecond
				cc.JobPollInitial, cc.JobPollMax = 5*time.Millisecond, 50*time.Millisecond
			}})
			if err != nil {
				return nil, err
			}
			cc := &closeCounter{Backend: b}
			e.mu.Lock()
			e.built[c.BackendName] = append(e.built[c.BackendName], cc)
			e.mu.Unlock()
			return cc, nil
		},
		ReservedNames: []string{"from-file"},
		Resync:        200 * time.Millisecond,
		CheckTimeout:  10 * time.Second,
		Checked: func(backend, driver string, err error) {
			e.note(fmt.Sprintf("checked %s %s %v", backend, driver, err != nil))
		},
		Forgotten: func(backend string) { e.note("forgotten " + backend) },
		Served: func() {
			bs, _ := e.w.Backends()
			var names []string
			for _, b := range bs {
				names = append(names, b.Name())
			}
			e.mu.Lock()
			e.served = append(e.served, names)
			e.mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	e.w = w
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		if t.Failed() {
			t.Logf("logs:\n%s", e.logs)
		}
	})
	return e
}

var logOutput = logrus.StandardLogger().Out

func (e *env) startSim(password, addr string) {
	e.t.Helper()
	s, err := ontapsim.New(ontapsim.Config{Password: password, DataDir: e.dataDir})
	if err != nil {
		e.t.Fatal(err)
	}
	raw, err := s.Start(addr, false)
	if err != nil {
		e.t.Fatal(err)
	}
	u, _ := url.Parse(raw)
	e.sim, e.addr = s, u.Host
	e.t.Cleanup(func() { _ = s.Close() })
}

// secret is a credential Secret as the API serves it: data base64-encoded.
func secret(name, password string) *unstructured.Unstructured {
	b64 := base64.StdEncoding.EncodeToString
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"data":     map[string]any{"username": b64([]byte("admin")), "password": b64([]byte(password))},
	}}
}

func (e *env) spec(extra map[string]any) map[string]any {
	s := map[string]any{
		"version": int64(1), "storageDriverName": "ontap-nas", "managementLIF": e.addr, "svm": "svm0",
		"credentials": map[string]any{"name": "nas-creds"},
	}
	for k, v := range extra {
		s[k] = v
	}
	return s
}

func (e *env) create(name string, spec map[string]any, status map[string]any) {
	e.t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "trident.netapp.io/v1", "kind": "TridentBackendConfig",
		"metadata": map[string]any{"name": name, "namespace": ns, "uid": name + "-uid"},
		"spec":     spec,
	}}
	if status != nil {
		obj.Object["status"] = status
	}
	if _, err := e.dyn.Resource(GVR).Namespace(ns).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) get(name string) *unstructured.Unstructured {
	e.t.Helper()
	obj, err := e.dyn.Resource(GVR).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return obj
}

func (e *env) update(name string, edit func(*unstructured.Unstructured)) {
	e.t.Helper()
	obj := e.get(name)
	edit(obj)
	if _, err := e.dyn.Resource(GVR).Namespace(ns).Update(context.Background(), obj, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// waitStatus waits until the resource's status satisfies ok.
func (e *env) waitStatus(name, what string, ok func(Status) bool) Status {
	e.t.Helper()
	var st Status
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		st = statusOf(e.get(name))
		if ok(st) {
			return st
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.t.Fatalf("%s: status of %s never became %s; last %+v", e.t.Name(), name, what, st)
	return st
}

func (e *env) waitFor(what string, ok func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			e.t.Fatalf("never: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *env) backend(name string) backends.Backend {
	bs, _ := e.w.Backends()
	for _, b := range bs {
		if b.Name() == name {
			return b
		}
	}
	return nil
}

func bound(st Status) bool {
	return st.Phase == PhaseBound && st.LastOperationStatus == OperationSuccess
}

// TestCreateRotateDelete follows one resource through its life: created,
// its credentials rotated, deleted while it still holds a volume.
func TestCreateRotateDelete(t *testing.T) {
	e := newEnv(t)
	if _, err := e.w.Backends(); err == nil {
		// Before the first list nothing may be reported gone.
		e.waitFor("first list", func() bool { _, err := e.w.Backends(); return err == nil })
	}
	first, vol := e.createWithVolume("nas")
	second := e.rotatePassword("nas", first, vol)
	e.deleteHolding("nas", second, vol)
	e.assertNoCredentials(password1, password2)
}

// createWithVolume creates a resource and a volume on its backend. The
// backend appears, bound, with Trident's message and our finalizer;
// backendName defaults to the resource's name.
func (e *env) createWithVolume(name string) (backends.Backend, *backends.Volume) {
	t := e.t
	t.Helper()
	e.create(name, e.spec(nil), nil)
	st := e.waitStatus(name, "Bound", bound)
	if st.Message != "Backend '"+name+"' created" || st.BackendName != name || st.DeletionPolicy != PolicyDelete {
		t.Errorf("status = %+v", st)
	}
	if fins := e.get(name).GetFinalizers(); len(fins) != 1 || fins[0] != Finalizer {
		t.Errorf("finalizers = %v", fins)
	}
	b := e.backend(name)
	if b == nil {
		t.Fatalf("no backend %s", name)
	}
	pools, err := b.Pools(context.Background())
	if err != nil || len(pools) == 0 {
		t.Fatalf("Pools = %v, %v", pools, err)
	}
	vol, err := b.CreateVolume(context.Background(), &backends.CreateRequest{Name: "pvc-1", Pool: pools[0].Name, SizeBytes: 1 << 30, AccessType: backends.AccessMount})
	if err != nil {
		t.Fatal(err)
	}
	return b, vol
}

// rotatePassword changes the password on ONTAP: the running backend is
// refused until the Secret (nas-creds, which e.spec names) has the new
// password; then a new backend, made with it, serves and finds vol.
func (e *env) rotatePassword(name string, first backends.Backend, vol *backends.Volume) backends.Backend {
	t := e.t
	t.Helper()
	ctx := context.Background()
	addr := e.addr
	if err := e.sim.Close(); err != nil {
		t.Fatal(err)
	}
	e.startSim(password2, addr)
	if _, err := first.ListVolumes(ctx); err == nil {
		t.Fatal("the old password still works; the rotation test proves nothing")
	}
	if _, err := e.dyn.Resource(secretsGVR).Namespace(ns).Update(ctx, secret("nas-creds", password2), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(name, "updated", func(st Status) bool { return bound(st) && st.Message == "Backend '"+name+"' updated" })
	// The status may say "updated" before the Secret's update arrives: a
	// reconcile of the unchanged resource that repaired a failure status
	// (the old password refused meanwhile) writes the same message.
	e.waitFor("the backend rebuilt with the rotated credentials", func() bool { b := e.backend(name); return b != nil && b != first })
	second := e.backend(name)
	// The replaced backend releases its connections, once.
	e.waitFor("the replaced backend closed", func() bool { return closes(first) > 0 })
	if closes(first) != 1 || closes(second) != 0 {
		t.Errorf("Close calls: replaced backend %d, serving one %d; want 1, 0", closes(first), closes(second))
	}
	vols, err := second.ListVolumes(ctx)
	if err != nil || len(vols) != 1 || vols[0].ID != vol.ID {
		t.Fatalf("after rotation ListVolumes = %v, %v", vols, err)
	}
	return second
}

// deleteHolding deletes a resource whose backend b holds vol: the backend
// stays, takes no new volume, and the resource keeps its finalizer; once
// vol is deleted, the backend goes, closed once, and the finalizer comes
// off.
func (e *env) deleteHolding(name string, b backends.Backend, vol *backends.Volume) {
	t := e.t
	t.Helper()
	ctx := context.Background()
	e.update(name, func(o *unstructured.Unstructured) { o.SetDeletionTimestamp(&metav1.Time{Time: time.Now()}) })
	st := e.waitStatus(name, "Deleting", func(st Status) bool { return st.Phase == PhaseDeleting })
	if !strings.Contains(st.Message, "still has 1 volume") {
		t.Errorf("deleting status = %+v", st)
	}
	draining := e.backend(name)
	if draining == nil {
		t.Fatal("a backend with volumes was dropped on delete")
	}
	if p, _ := draining.Pools(ctx); len(p) != 0 {
		t.Error("a backend being deleted still offers pools")
	}
	if _, err := draining.CreateVolume(ctx, &backends.CreateRequest{Name: "pvc-2", Pool: vol.Pool, SizeBytes: 1 << 30}); !errors.Is(err, backends.ErrUnavailable) {
		t.Errorf("CreateVolume on a backend being deleted: %v, want ErrUnavailable", err)
	}
	if fins := e.get(name).GetFinalizers(); len(fins) != 1 {
		t.Fatalf("finalizer removed while volumes remain: %v", fins)
	}
	vol, err := draining.Volume(ctx, vol.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := draining.DeleteVolume(ctx, vol); err != nil {
		t.Fatal(err)
	}
	e.waitFor("finalizer removed", func() bool { return len(e.get(name).GetFinalizers()) == 0 })
	e.waitFor("backend removed", func() bool { return e.backend(name) == nil })
	if _, err := e.w.Backends(); err != nil {
		t.Errorf("Backends after a clean delete: %v", err)
	}
	e.waitFor("the removed backend closed", func() bool { return closes(b) > 0 })
	if n := closes(b); n != 1 {
		t.Errorf("the removed backend was closed %d times", n)
	}
}

func TestBadConfigs(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.create("nas", e.spec(nil), nil)
	e.waitStatus("nas", "Bound", bound)
	good := e.backend("nas")

	failedCreate := func(st Status) bool {
		return st.Phase == PhaseUnbound && st.LastOperationStatus == OperationFailed && strings.HasPrefix(st.Message, "Failed to create backend: ")
	}
	for _, tc := range []struct {
		name string
		spec map[string]any
		want string
	}{
		{"unknown-key", e.spec(map[string]any{"managmentLIF": "x"}), `managmentLIF`},
		{"bad-value", e.spec(map[string]any{"defaults": map[string]any{"snapshotReserve": "abc"}}), "defaults.snapshotReserve"},
		{"no-secret", e.spec(map[string]any{"credentials": map[string]any{"name": "missing-creds"}}), `Secret "missing-creds"`},
		{"name-clash", e.spec(map[string]any{"backendName": "nas"}), `backend name "nas" is already used by TridentBackendConfig nas`},
		{"reserved-name", e.spec(map[string]any{"backendName": "from-file"}), "already used by a --backend-config file"},
		{"unsupported-driver", e.spec(map[string]any{"storageDriverName": "ontap-nas-flexgroup"}), "ontap-nas-flexgroup"},
		{"wrong-svm", e.spec(map[string]any{"svm": "nosuchsvm"}), "ONTAP:"},
	} {
		e.create(tc.name, tc.spec, nil)
		st := e.waitStatus(tc.name, "failed", failedCreate)
		if !strings.Contains(st.Message, tc.want) {
			t.Errorf("%s: message %q does not mention %q", tc.name, st.Message, tc.want)
		}
	}
	// A backend that failed its first contact with ONTAP is closed.
	e.waitFor("the backend that failed its check closed", func() bool {
		b := e.builtBackends("wrong-svm")
		return len(b) > 0 && b[0].closes.Load() == 1
	})
	// Nothing else broke: the good backend serves, and failed new configs
	// (never bound) do not make the set incomplete.
	bs, err := e.w.Backends()
	if err != nil || len(bs) != 1 || bs[0] != good {
		t.Fatalf("Backends = %v, %v; want only the good one", bs, err)
	}
	if _, err := good.ListVolumes(ctx); err != nil {
		t.Fatal(err)
	}

	// The missing Secret appears: the resource binds at the next resync.
	if _, err := e.dyn.Resource(secretsGVR).Namespace(ns).Create(ctx, secret("missing-creds", password1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("no-secret", "Bound", bound)

	// A bad update keeps the backend that works.
	e.update("nas", func(o *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(o.Object, "abc", "spec", "defaults", "snapshotReserve")
	})
	st := e.waitStatus("nas", "update failed", func(st Status) bool { return st.LastOperationStatus == OperationFailed })
	if st.Phase != PhaseBound || !strings.HasPrefix(st.Message, "Failed to apply the backend update; ") {
		t.Errorf("status after a bad update = %+v", st)
	}
	if e.backend("nas") != good {
		t.Fatal("a bad update replaced the working backend")
	}
	if _, err := e.w.Backends(); err != nil {
		t.Errorf("Backends after a bad update: %v", err)
	}
	// Reverted: back to Success without a rebuild.
	e.update("nas", func(o *unstructured.Unstructured) { unstructured.RemoveNestedField(o.Object, "spec", "defaults") })
	e.waitStatus("nas", "Bound again", bound)
	if e.backend("nas") != good {
		t.Error("reverting to the applied config rebuilt the backend")
	}
	e.assertNoCredentials(password1)
}

// A resource Trident bound (its backend may hold volumes) that ontap-csi
// cannot load: nothing may be reported gone while it is not loaded.
func TestBoundByTridentButNotLoadable(t *testing.T) {
	e := newEnv(t)
	tridentStatus := map[string]any{
		"phase": "Bound", "lastOperationStatus": "Success", "message": "Backend 'eco' created",
		"deletionPolicy": "delete", "backendInfo": map[string]any{"backendName": "eco", "backendUUID": "9c3e-trident"},
	}
	e.create("eco", e.spec(map[string]any{"storageDriverName": "ontap-nas-flexgroup", "backendName": "eco"}), tridentStatus)
	st := e.waitStatus("eco", "failed", func(st Status) bool { return st.LastOperationStatus == OperationFailed })
	if st.Phase != PhaseBound || st.BackendUUID != "9c3e-trident" || !strings.HasPrefix(st.Message, "Failed to load the backend; ") {
		t.Errorf("status = %+v; the phase and Trident's backend UUID must stay", st)
	}
	_, err := e.w.Backends()
	if err == nil || !strings.Contains(err.Error(), "eco") {
		t.Fatalf("Backends = %v; want an error naming eco", err)
	}

	// Fixed by the user (here: a driver we serve): loaded, and Trident's
	// UUID kept since it is the same backend name.
	e.update("eco", func(o *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(o.Object, "ontap-nas", "spec", "storageDriverName")
	})
	st = e.waitStatus("eco", "Bound", bound)
	if st.BackendUUID != "9c3e-trident" {
		t.Errorf("Trident's backend UUID was dropped: %+v", st)
	}
	if _, err := e.w.Backends(); err != nil {
		t.Errorf("Backends after the fix: %v", err)
	}
}

func TestDeletePolicies(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.create("keep", e.spec(map[string]any{"deletionPolicy": "retain"}), nil)
	st := e.waitStatus("keep", "Bound", bound)
	if st.DeletionPolicy != PolicyRetain {
		t.Errorf("deletionPolicy = %q", st.DeletionPolicy)
	}
	b := e.backend("keep")
	pools, _ := b.Pools(ctx)
	if _, err := b.CreateVolume(ctx, &backends.CreateRequest{Name: "pvc-r", Pool: pools[0].Name, SizeBytes: 1 << 30, AccessType: backends.AccessMount}); err != nil {
		t.Fatal(err)
	}
	// retain: the backend goes at once, volumes or not; ONTAP keeps them.
	e.update("keep", func(o *unstructured.Unstructured) { o.SetDeletionTimestamp(&metav1.Time{Time: time.Now()}) })
	e.waitFor("finalizer removed", func() bool { return len(e.get("keep").GetFinalizers()) == 0 })
	e.waitFor("backend removed", func() bool { return e.backend("keep") == nil })
	if _, err := b.Volume(ctx, "pvc-r"); err != nil {
		t.Errorf("the volume is gone from ONTAP: %v", err)
	}

	// A resource removed outright (no finalizer honoured): its backend goes.
	e.create("gone", e.spec(nil), nil)
	e.waitStatus("gone", "Bound", bound)
	if err := e.dyn.Resource(GVR).Namespace(ns).Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("backend removed", func() bool { return e.backend("gone") == nil })

	// Created again under the same name: a new resource, a new backend.
	e.create("gone", e.spec(nil), nil)
	e.waitStatus("gone", "Bound", func(st Status) bool { return bound(st) && st.Message == "Backend 'gone' created" })
}

// servedCalls returns what Backends returned at each Served call.
func (e *env) servedCalls() [][]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.served)
}

// TestChecksAreReported: each configuration's contact with ONTAP is
// passed on (for the backend states of `ontap-csi backends` and the
// metrics), and the backend forgotten when its resource goes. Served is
// called once the backend is served and once it is gone, and only then:
// what it prompts (the inventory's listing) sees the change.
func TestChecksAreReported(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.create("good", e.spec(nil), nil)
	e.create("refused", e.spec(map[string]any{"svm": "no-such-svm"}), nil)
	e.waitStatus("good", "Bound", bound)
	e.waitStatus("refused", "Failed", func(st Status) bool { return st.LastOperationStatus == OperationFailed })
	e.waitFor("both checks reported", func() bool {
		n := e.noted()
		return slices.Contains(n, "checked good ontap-nas false") && slices.Contains(n, "checked refused ontap-nas true")
	})
	e.waitFor("Served told of the load", func() bool { return len(e.servedCalls()) > 0 })
	if got := e.servedCalls(); len(got) != 1 || !slices.Equal(got[0], []string{"good"}) {
		t.Errorf("Served saw %q, want one call that sees [good]", got)
	}
	for _, name := range []string{"good", "refused"} {
		if err := e.dyn.Resource(GVR).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.waitFor("both forgotten", func() bool {
		n := e.noted()
		return slices.Contains(n, "forgotten good") && slices.Contains(n, "forgotten refused")
	})
	e.waitFor("Served told of the removal", func() bool { return len(e.servedCalls()) == 2 })
	if got := e.servedCalls(); len(got[1]) != 0 {
		t.Errorf("Served after the removal saw %q, want nothing served", got[1])
	}
}

func TestNeedsReconcile(t *testing.T) {
	base := func() *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": "x", "resourceVersion": "1", "uid": "u1"},
			"spec":     map[string]any{"svm": "svm0"},
			"status":   map[string]any{"phase": ""},
		}}
	}
	for name, edit := range map[string]func(*unstructured.Unstructured){
		"spec":       func(o *unstructured.Unstructured) { o.Object["spec"] = map[string]any{"svm": "svm1"} },
		"finalizers": func(o *unstructured.Unstructured) { o.SetFinalizers([]string{Finalizer}) },
		"deletion":   func(o *unstructured.Unstructured) { o.SetDeletionTimestamp(&metav1.Time{Time: time.Unix(1, 0)}) },
		"uid":        func(o *unstructured.Unstructured) { o.SetUID(types.UID("u2")) },
	} {
		n := base()
		edit(n)
		n.SetResourceVersion("2")
		if !needsReconcile(base(), n) {
			t.Errorf("%s change is not reconciled", name)
		}
	}
	n := base()
	n.Object["status"] = map[string]any{"phase": "Bound"}
	n.SetResourceVersion("2")
	if needsReconcile(base(), n) {
		t.Error("a status-only change (our own write) is reconciled")
	}
}

// assertNoCredentials checks every log line and every status.
func (e *env) assertNoCredentials(secrets ...string) {
	e.t.Helper()
	list, err := e.dyn.Resource(GVR).Namespace(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	text := e.logs.String()
	for _, o := range list.Items {
		text += fmt.Sprint(o.Object["status"])
	}
	for _, s := range secrets {
		if strings.Contains(text, s) {
			e.t.Errorf("a credential appears in a log line or a status")
		}
	}
	if !strings.Contains(text, "backend created") {
		e.t.Error("the capture saw no log lines; the check proves nothing")
	}
}

// Without the CRD (a standalone install with --crd_persistence) the set is
// complete and empty: nothing waits for TridentBackendConfigs.
func TestNoCRD(t *testing.T) {
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{GVR: "TridentBackendConfigList"})
	dyn.PrependReactor("list", "tridentbackendconfigs", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(GVR.GroupResource(), "")
	})
	w, err := New(Config{Dynamic: dyn, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		bs, err := w.Backends()
		if err == nil && len(bs) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Backends = %v, %v; want none and complete", bs, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
