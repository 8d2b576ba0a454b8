package registration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
)

// watchdog is the holder's periodic check (docs/design/registration.md §5.8 "Watchdog").
// REG_DIR events trigger the same checks at once (onRegDirEvent).
func (m *Manager) watchdog() {
	m.checkEndpoints()
	cur := m.cur
	if cur.reg != nil && !cur.retired && !cur.reg.sock.owned() {
		// Deleted or replaced: kubelet has deregistered the driver (K4) or
		// is about to.
		m.reregisterAfterFileEvent(reasonSocketRemoved)
		return
	}
	if cur.registered {
		m.sweepRegDir()
		m.checkCSINode()
	}
	if time.Since(m.lastGC) >= m.t.gcEvery {
		m.collectGarbage()
	}
}

// checkEndpoints re-binds E if it is no longer this holder's socket, and
// csi.sock if it is missing. A csi.sock that another process bound (a legacy
// Trident container) is left to it.
func (m *Manager) checkEndpoints() {
	if m.e == nil || !m.e.owned() {
		m.log.WithField("endpoint", m.lay.endpoint).Warn("E is missing or not this holder's socket; binding it again")
		if err := m.rebind(&m.e, m.lay.endpoint); err != nil {
			m.logOnce(err, "cannot bind E again")
		}
	}
	if m.lay.csiEndpoint == "" {
		return
	}
	if m.c != nil && !m.c.owned() {
		m.orphan(m.c)
		m.c = nil
	}
	if _, err := os.Lstat(m.lay.csiEndpoint); errors.Is(err, os.ErrNotExist) {
		m.log.WithField("socket", m.lay.csiEndpoint).Info("--csi_endpoint socket is missing; binding it again")
		if err := m.rebind(&m.c, m.lay.csiEndpoint); err != nil {
			m.logOnce(err, "cannot bind --csi_endpoint again")
		}
	}
}

// rebind binds a fresh socket, checks NodeGetInfo through it (I6) and
// renames it onto target, under the lock and only while still the holder.
func (m *Manager) rebind(slot **servedSocket, target string) error {
	s, err := m.bindTemp(target)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(m.life, m.t.nodeInfo)
	_, err = probeNodeInfo(ctx, s.path)
	cancel()
	if err == nil {
		err = m.lay.withHandoverLock(func() error {
			l, err := readLease(m.lay.leasePath())
			if err != nil || l == nil || l.Generation != m.cur.g {
				return errNotHolder
			}
			return s.moveTo(target)
		})
	}
	if err != nil {
		s.discard()
		return err
	}
	if *slot != nil {
		m.orphan(*slot)
	}
	*slot = s
	return nil
}

// waitForAPI is step 4: kubelet's RegisterPlugin updates the Node and
// CSINode objects, and if the API server does not answer it unregisters the
// driver by name (K5), which would drop a predecessor's good registration.
// The wait is bounded; a SIGTERM ends it (false: do not register).
func (m *Manager) waitForAPI() bool {
	abort := m.runCtx.Done()
	if m.terminating {
		abort = nil
	}
	deadline := time.Now().Add(m.t.apiWait)
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(m.life, 5*time.Second)
		err := m.cfg.Kube.Ping(ctx)
		cancel()
		if err == nil {
			if i > 0 {
				m.log.Info("API server answers; registering")
			}
			return true
		}
		if i == 0 {
			m.log.WithError(err).Warn("waiting for the API server before registering, or kubelet would drop the driver (K5)")
		}
		if time.Now().After(deadline) {
			m.log.WithError(err).WithField("waited", m.t.apiWait).Error("API server still unreachable; registering anyway")
			return true
		}
		select {
		case <-abort:
			return false
		case <-time.After(time.Second):
		}
	}
}

// csinodeWatch follows this node's CSINode object with a list and a watch.
// (client-go's informer would pull in a module outside go.mod.)
type csinodeWatch struct {
	node   string
	driver string

	mu    sync.Mutex
	known bool // a list has succeeded and the watch is current
	has   bool // CSINode lists the driver

	// Owned by the Run loop.
	missingSince time.Time
	nextAllowed  time.Time
	backoff      time.Duration
}

func watchCSINode(ctx context.Context, client dynamic.Interface, node, driver string, log *logrus.Entry) *csinodeWatch {
	w := &csinodeWatch{node: node, driver: driver}
	go w.run(ctx, client.Resource(csinodesGVR), log)
	return w
}

func (w *csinodeWatch) run(ctx context.Context, csinodes dynamic.NamespaceableResourceInterface, log *logrus.Entry) {
	sel := fields.OneTermEqualSelector("metadata.name", w.node).String()
	pause := time.Second
	for ctx.Err() == nil {
		err := w.follow(ctx, csinodes, sel)
		w.set(false, false)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			log.WithError(err).Debug("CSINode watch failed; retrying")
			pause = min(2*pause, 30*time.Second)
		} else {
			pause = time.Second // the server ended the watch; resume
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
	}
}

// follow lists the CSINode and then watches it until the watch ends.
func (w *csinodeWatch) follow(ctx context.Context, csinodes dynamic.NamespaceableResourceInterface, sel string) error {
	list, err := csinodes.List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return err
	}
	has := false
	for i := range list.Items {
		has = has || w.lists(&list.Items[i])
	}
	w.set(true, has)
	wi, err := csinodes.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		return err
	}
	defer wi.Stop()
	for ev := range wi.ResultChan() {
		switch ev.Type {
		case watch.Added, watch.Modified:
			if cn, ok := ev.Object.(*unstructured.Unstructured); ok {
				w.set(true, w.lists(cn))
			}
		case watch.Deleted:
			w.set(true, false)
		case watch.Error:
			return apierrors.FromObject(ev.Object)
		}
	}
	return nil
}

// lists reports whether cn is this node's CSINode and lists the driver in
// spec.drivers[].name.
func (w *csinodeWatch) lists(cn *unstructured.Unstructured) bool {
	if cn.GetName() != w.node {
		return false
	}
	drivers, _, _ := unstructured.NestedSlice(cn.Object, "spec", "drivers")
	for _, d := range drivers {
		if d, ok := d.(map[string]any); ok && d["name"] == w.driver {
			return true
		}
	}
	return false
}

func (w *csinodeWatch) set(known, has bool) {
	w.mu.Lock()
	w.known, w.has = known, has
	w.mu.Unlock()
}

// hasDriver reports whether CSINode lists the driver; known is false while
// the watch is not current.
func (w *csinodeWatch) hasDriver() (has, known bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.has, w.known
}

// checkCSINode is the optional watchdog: kubelet can drop the driver without
// any file event, e.g. when a CSINode update fails during a registration
// (K5). If CSINode lacks the driver for csinodeGrace while we are
// registered, register a new generation, with a growing pause between tries.
func (m *Manager) checkCSINode() {
	w := m.csinode
	if w == nil {
		return
	}
	has, known := w.hasDriver()
	if !known {
		return
	}
	now := time.Now()
	if has {
		w.missingSince, w.backoff = time.Time{}, 0
		return
	}
	if w.missingSince.IsZero() {
		w.missingSince = now
		return
	}
	if now.Sub(w.missingSince) < m.t.csinodeGrace || now.Before(w.nextAllowed) {
		return
	}
	w.backoff = min(max(2*w.backoff, m.t.csinodeGrace), 5*time.Minute)
	w.nextAllowed = now.Add(w.backoff)
	w.missingSince = time.Time{}
	m.log.WithField("node", w.node).Warn(fmt.Sprintf("CSINode has lacked the driver for over %s while registered", m.t.csinodeGrace))
	m.reregister(reasonCSINodeMissing)
}
