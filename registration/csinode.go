package registration

import (
	"context"
	"fmt"
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
	w := m.watch.csinode
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
	if now.Sub(w.missingSince) < m.timings.csinodeGrace || now.Before(w.nextAllowed) {
		return
	}
	w.backoff = min(max(2*w.backoff, m.timings.csinodeGrace), 5*time.Minute)
	w.nextAllowed = now.Add(w.backoff)
	w.missingSince = time.Time{}
	m.log.WithField("node", w.node).Warn(fmt.Sprintf("CSINode has lacked the driver for over %s while registered", m.timings.csinodeGrace))
	m.reregister(reasonCSINodeMissing)
}
