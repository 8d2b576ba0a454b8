package registration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/fsnotify/fsnotify"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// fakeKubelet is a small model of kubelet's plugin watcher and CSI
// registration handler, enough to prove the protocol's mechanics (the real
// kubelet runs in test/kubelet):
//   - it acts on Create and Remove only and ignores dot-names on Create (K1);
//   - it holds registrations by socket path, and the driver by name with one
//     endpoint (K2, K3);
//   - a Remove of any path it holds deregisters the driver by name, and so
//     does a Create on a path it holds (K4, docs/design/registration.md §7.5d);
//   - a new registration needs a strictly higher version (K3), and then
//     NodeGetInfo through the endpoint, failing which the driver is dropped
//     (K5); then NotifyRegistrationStatus on the same connection (K6);
//   - a refused GetInfo is retried (K7).
//
// Events are handled one at a time, without kubelet's 1 s reconcile.
type fakeKubelet struct {
	t      testing.TB
	regDir string
	w      *fsnotify.Watcher

	mu       sync.Mutex
	gate     chan struct{} // if set, every Notify(true) waits until it is closed
	asw      map[string]bool
	driver   *kubeletDriver
	deregs   int      // DeRegisterPlugin calls: each one is a gap
	accepted []uint64 // versions registered, in order
	notified []uint64 // versions whose Notify(true) has returned, in order
	removed  []string // non-dot names removed from REG_DIR
	retry    map[string]int

	stop chan struct{}
	done chan struct{}
}

type kubeletDriver struct {
	endpoint string
	version  uint64 // N of 1.0.N
	socket   string
}

func startKubelet(t testing.TB, regDir string) *fakeKubelet {
	t.Helper()
	w, err := fsnotify.NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add(regDir); err != nil {
		t.Fatal(err)
	}
	k := &fakeKubelet{
		t: t, regDir: regDir, w: w,
		asw: map[string]bool{}, retry: map[string]int{},
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	// The startup walk treats existing sockets like Creates.
	ents, _ := os.ReadDir(regDir)
	for _, e := range ents {
		k.retry[filepath.Join(regDir, e.Name())] = 0
	}
	go k.loop()
	t.Cleanup(func() {
		close(k.stop)
		<-k.done
		w.Close()
	})
	return k
}

func (k *fakeKubelet) loop() {
	defer close(k.done)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-k.stop:
			return
		case ev := <-k.w.Events:
			name := filepath.Base(ev.Name)
			switch {
			case ev.Has(fsnotify.Create):
				if !strings.HasPrefix(name, ".") && isSocket(ev.Name) {
					k.onCreate(ev.Name)
				}
			case ev.Has(fsnotify.Remove):
				k.onRemove(ev.Name)
			}
		case <-tick.C:
			for path, n := range k.retry {
				delete(k.retry, path)
				if isSocket(path) && n < 50 && !strings.HasPrefix(filepath.Base(path), ".") {
					if !k.register(path) {
						k.retry[path] = n + 1
					}
				}
			}
		}
	}
}

func (k *fakeKubelet) onCreate(path string) {
	k.mu.Lock()
	stale := k.asw[path]
	if stale {
		delete(k.asw, path)
		k.deregisterLocked("create on a registered path " + filepath.Base(path))
	}
	k.mu.Unlock()
	if !k.register(path) {
		k.retry[path] = 1
	}
}

func (k *fakeKubelet) onRemove(path string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !strings.HasPrefix(filepath.Base(path), ".") {
		k.removed = append(k.removed, filepath.Base(path))
	}
	delete(k.retry, path)
	if k.asw[path] {
		delete(k.asw, path)
		k.deregisterLocked("remove of " + filepath.Base(path))
	}
}

func (k *fakeKubelet) deregisterLocked(why string) {
	k.deregs++
	k.driver = nil
	k.t.Logf("fake kubelet: DeRegisterPlugin (%s)", why)
}

// register reports false if kubelet would try the socket again later.
func (k *fakeKubelet) register(path string) bool {
	conn, err := grpc.NewClient("unix:"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return false
	}
	defer conn.Close()
	client := registerapi.NewRegistrationClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	info, err := client.GetInfo(ctx, &registerapi.InfoRequest{})
	cancel()
	if err != nil {
		return false // K7
	}
	notify := func(ok bool, msg string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := client.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: ok, Error: msg}); err != nil {
			k.t.Errorf("fake kubelet: NotifyRegistrationStatus on %s failed: %v", filepath.Base(path), err)
		}
	}
	v, err := patchOf(info.SupportedVersions)
	if err != nil || info.Type != registerapi.CSIPlugin || info.Name != testDriver {
		k.t.Errorf("fake kubelet: bad plugin info %v: %v", info, err)
		return true
	}
	k.mu.Lock()
	if cur := k.driver; cur != nil && cur.version >= v {
		k.mu.Unlock()
		notify(false, fmt.Sprintf("RegisterPlugin error -- plugin validation failed with err: validation for CSI driver %q failed. "+
			"Another driver with the same name is already registered with a higher supported version: %q", testDriver, "1.0."+strconv.FormatUint(cur.version, 10)))
		return false
	}
	k.asw[path] = true
	k.driver = &kubeletDriver{endpoint: info.Endpoint, version: v, socket: path}
	k.mu.Unlock()

	if _, err := nodeGetInfo(info.Endpoint); err != nil {
		k.mu.Lock()
		k.deregisterLocked("NodeGetInfo failed: " + err.Error())
		k.mu.Unlock()
		notify(false, "RegisterPlugin error -- plugin registration failed with err: "+err.Error())
		return true // before v1.36 never retried (K5)
	}
	k.mu.Lock()
	k.accepted = append(k.accepted, v)
	gate := k.gate
	k.mu.Unlock()
	if gate != nil {
		<-gate
	}
	notify(true, "")
	k.mu.Lock()
	k.notified = append(k.notified, v)
	k.mu.Unlock()
	return true
}

func patchOf(versions []string) (uint64, error) {
	if len(versions) != 1 {
		return 0, fmt.Errorf("want one version, got %v", versions)
	}
	rest, ok := strings.CutPrefix(versions[0], "1.0.")
	if !ok {
		return 0, fmt.Errorf("version %q is not 1.0.N", versions[0])
	}
	return strconv.ParseUint(rest, 10, 64)
}

func nodeGetInfo(endpoint string) (*csi.NodeGetInfoResponse, error) {
	conn, err := grpc.NewClient("unix:"+endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return csi.NewNodeClient(conn).NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
}

// registered returns the driver kubelet has, or nil.
func (k *fakeKubelet) registered() *kubeletDriver {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.driver == nil {
		return nil
	}
	d := *k.driver
	return &d
}

func (k *fakeKubelet) deregistrations() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.deregs
}

func (k *fakeKubelet) acceptedVersions() []uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]uint64(nil), k.accepted...)
}

func (k *fakeKubelet) notifiedVersions() []uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]uint64(nil), k.notified...)
}

func (k *fakeKubelet) removedNames() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.removed...)
}

// waitRegistered waits until kubelet has the driver at version 1.0.g with
// any g > above, and returns it.
func (k *fakeKubelet) waitRegistered(t testing.TB, above uint64) *kubeletDriver {
	t.Helper()
	var d *kubeletDriver
	eventually(t, "kubelet registers a generation above "+strconv.FormatUint(above, 10), func() bool {
		d = k.registered()
		return d != nil && d.version > above
	})
	return d
}

// servedSampler calls NodeGetInfo through kubelet's registered endpoint every
// 10 ms, as kubelet would for volume calls, and counts the calls that fail
// after the first success.
type servedSampler struct {
	mu       sync.Mutex
	ok, fail int
	lastErr  error
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
}

func sampleServed(t *testing.T, k *fakeKubelet) *servedSampler {
	p := &servedSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-tick.C:
			}
			d := k.registered()
			var err error
			if d == nil {
				err = fmt.Errorf("driver %s not found in the list of registered CSI drivers", testDriver)
			} else {
				_, err = nodeGetInfo(d.endpoint)
			}
			p.mu.Lock()
			switch {
			case err == nil:
				p.ok++
			case p.ok > 0:
				p.fail++
				p.lastErr = err
			}
			p.mu.Unlock()
		}
	}()
	t.Cleanup(p.end)
	return p
}

func (p *servedSampler) end() {
	p.once.Do(func() {
		close(p.stop)
		<-p.done
	})
}

// result ends the sampling and returns its counts.
func (p *servedSampler) result() (ok, fail int, lastErr error) {
	p.end()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ok, p.fail, p.lastErr
}

// eventually polls cond every 20 ms for up to a generous 20 s.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
