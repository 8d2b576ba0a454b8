package backendconfigs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/server"
)

// reconcile brings the backend of one resource in line with it. An error
// retries with backoff; the resource's status already says what failed.
func (w *Watcher) reconcile(ctx context.Context, name string) error {
	tbc := w.object(name)
	if tbc == nil {
		w.unload(name, "TridentBackendConfig deleted")
		return nil
	}
	var err error
	log := w.log.WithField("tridentBackendConfig", name)
	if w.servesOther(name, tbc.GetUID()) {
		w.unload(name, "TridentBackendConfig deleted and created again")
	}

	if tbc.GetDeletionTimestamp() != nil {
		return w.finalize(ctx, tbc, log)
	}
	if !slices.Contains(tbc.GetFinalizers(), Finalizer) {
		tbc.SetFinalizers(append(tbc.GetFinalizers(), Finalizer))
		if tbc, err = w.client.Update(ctx, tbc, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("adding the finalizer: %w", err)
		}
	}

	cur := w.current(name, tbc.GetUID())
	spec, _, err := unstructured.NestedMap(tbc.Object, "spec")
	if err != nil {
		return w.failed(ctx, tbc, cur, PolicyDelete, fmt.Errorf("spec: %w", err), nil, log)
	}
	r, err := render(ctx, name, spec, w.secret)
	if err != nil {
		return w.failed(ctx, tbc, cur, policyOf(spec), err, nil, log)
	}
	if cur != nil && cur.fingerprint == r.fingerprint() {
		return w.unchanged(ctx, tbc, cur, r)
	}
	return w.load(ctx, tbc, cur, r, log)
}

// unchanged answers a resource whose backend was built from exactly what
// it says now: it repairs a status that still tells of a failure since
// resolved (ONTAP back, Secret restored).
func (w *Watcher) unchanged(ctx context.Context, tbc *unstructured.Unstructured, cur *loaded, r *rendered) error {
	st := statusOf(tbc)
	if st.Phase != PhaseBound || st.LastOperationStatus != OperationSuccess {
		st.Phase, st.LastOperationStatus = PhaseBound, OperationSuccess
		st.Message = fmt.Sprintf("Backend '%s' updated", cur.driver.Name())
		st.BackendName, st.DeletionPolicy = cur.driver.Name(), r.deletionPolicy
		if _, err := w.writeStatus(ctx, tbc, st); err != nil {
			return err
		}
	}
	delete(w.lastFailure, tbc.GetName())
	return nil
}

// load builds the backend a resource now describes and, once ONTAP accepted
// it, serves it in place of cur (nil: the resource had none).
func (w *Watcher) load(ctx context.Context, tbc *unstructured.Unstructured, cur *loaded, r *rendered, log *logrus.Entry) (err error) {
	op := "backend_add" // Trident's operation names
	if cur != nil {
		op = "backend_update"
	}
	start := time.Now()
	defer func() { server.ObserveTridentOperation(op, start, err) }()
	name := tbc.GetName()
	if len(r.overridden) > 0 {
		log.WithFields(logrus.Fields{"secret": r.secretName, "keys": r.overridden}).Warn("the spec and its Secret both set credentials; the Secret's are used, as in Trident")
	}
	cfg, err := config.Parse("TridentBackendConfig "+w.cfg.Namespace+"/"+name, r.config, "")
	if err != nil {
		return w.failed(ctx, tbc, cur, r.deletionPolicy, err, r, log)
	}
	if who := w.nameTaken(cfg.BackendName, name); who != "" {
		return w.failed(ctx, tbc, cur, r.deletionPolicy, fmt.Errorf("backend name %q is already used by %s", cfg.BackendName, who), r, log)
	}
	b, err := w.cfg.NewBackend(cfg)
	if err != nil {
		return w.failed(ctx, tbc, cur, r.deletionPolicy, err, r, log)
	}
	// A configuration is applied only once ONTAP accepted it: a rotated
	// password that ONTAP refuses leaves the previous backend serving.
	cctx, cancel := context.WithTimeout(ctx, w.cfg.CheckTimeout)
	_, err = b.Pools(cctx)
	cancel()
	w.report(name, cfg.BackendName, cfg.StorageDriverName, err)
	if err != nil {
		release(b)
		return w.failed(ctx, tbc, cur, r.deletionPolicy, fmt.Errorf("ONTAP: %w", err), r, log)
	}
	w.set(name, &loaded{uid: tbc.GetUID(), driver: b, served: b, fingerprint: r.fingerprint()})
	delete(w.lastFailure, name)

	verb := "created"
	if cur != nil {
		verb = "updated"
	}
	st := statusOf(tbc)
	uuid := "" // Trident's backend UUID is kept for a roll-back to Trident
	if st.BackendName == cfg.BackendName {
		uuid = st.BackendUUID
	}
	log.WithFields(logrus.Fields{"backend": cfg.BackendName, "driver": cfg.StorageDriverName, "svm": cfg.SVM}).Infof("backend %s", verb)
	_, err = w.writeStatus(ctx, tbc, Status{
		Message:             fmt.Sprintf("Backend '%s' %s", cfg.BackendName, verb),
		BackendName:         cfg.BackendName,
		BackendUUID:         uuid,
		DeletionPolicy:      r.deletionPolicy,
		Phase:               PhaseBound,
		LastOperationStatus: OperationSuccess,
	})
	return err
}

// failed reports a configuration that could not be applied. A backend
// already serving the resource keeps serving (Trident: "Failed to apply the
// backend update"); a resource Trident or we bound before keeps its phase,
// so that the controller knows its volumes are not visible (Backends); a
// new one stays unbound. The error is returned so the reconcile is retried.
func (w *Watcher) failed(ctx context.Context, tbc *unstructured.Unstructured, cur *loaded, policy string, cause error, r *rendered, log *logrus.Entry) error {
	msg := cause.Error()
	if r != nil {
		msg = r.redact(msg)
	}
	st := statusOf(tbc)
	next := Status{BackendName: st.BackendName, BackendUUID: st.BackendUUID, DeletionPolicy: policy, Phase: st.Phase, LastOperationStatus: OperationFailed}
	switch {
	case cur != nil:
		next.Message = "Failed to apply the backend update; " + msg
		next.BackendName, next.Phase = cur.driver.Name(), PhaseBound
	case mayHoldVolumes(st.Phase):
		next.Message = "Failed to load the backend; " + msg
	default:
		next = Status{Message: "Failed to create backend: " + msg, DeletionPolicy: policy, Phase: PhaseUnbound, LastOperationStatus: OperationFailed}
	}
	if w.lastFailure[tbc.GetName()] != next.Message {
		w.lastFailure[tbc.GetName()] = next.Message
		log.WithField("phase", next.Phase).Warn(next.Message)
	}
	if _, err := w.writeStatus(ctx, tbc, next); err != nil {
		return errors.Join(errors.New(msg), err)
	}
	return errors.New(msg)
}

// finalize handles a resource being deleted. With deletionPolicy delete its
// backend stays, taking no new volumes, until it holds none (as Trident
// keeps a backend with volumes in its deleting state); then the backend goes
// and the finalizer comes off. ONTAP is never changed. With retain, or
// without a loaded backend, the finalizer comes off at once.
func (w *Watcher) finalize(ctx context.Context, tbc *unstructured.Unstructured, log *logrus.Entry) error {
	name := tbc.GetName()
	spec, _, _ := unstructured.NestedMap(tbc.Object, "spec")
	policy := policyOf(spec)
	if cur := w.current(name, tbc.GetUID()); cur != nil && policy == PolicyDelete {
		st := statusOf(tbc)
		st.Phase, st.DeletionPolicy = PhaseDeleting, policy
		lctx, cancel := context.WithTimeout(ctx, w.cfg.CheckTimeout)
		vols, err := cur.driver.ListVolumes(lctx)
		cancel()
		if err != nil || len(vols) > 0 {
			if _, ok := cur.served.(draining); !ok {
				w.set(name, &loaded{uid: cur.uid, driver: cur.driver, served: draining{cur.driver}, fingerprint: cur.fingerprint})
			}
			if err != nil {
				st.LastOperationStatus = OperationFailed
				st.Message = fmt.Sprintf("Cannot tell whether backend '%s' still has volumes; %v", cur.driver.Name(), err)
			} else {
				st.LastOperationStatus = OperationSuccess
				st.Message = fmt.Sprintf("Backend '%s' still has %d volume(s); it takes no new ones and goes once they are deleted", cur.driver.Name(), len(vols))
			}
			if w.lastFailure[name] != st.Message {
				w.lastFailure[name] = st.Message
				log.Info(st.Message)
			}
			if _, werr := w.writeStatus(ctx, tbc, st); werr != nil {
				return werr
			}
			if err != nil {
				return err
			}
			w.queue.AddAfter(name, drainRecheck)
			return nil
		}
	}
	w.unload(name, "TridentBackendConfig deleted (deletionPolicy "+policy+")")
	fins := tbc.GetFinalizers()
	if !slices.Contains(fins, Finalizer) {
		return nil
	}
	tbc.SetFinalizers(slices.DeleteFunc(fins, func(f string) bool { return f == Finalizer }))
	if _, err := w.client.Update(ctx, tbc, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("removing the finalizer: %w", err)
	}
	return nil
}

// policyOf reads the deletion policy without the rest of the spec; an
// invalid one counts as delete, the default and the careful choice.
func policyOf(spec map[string]any) string {
	if _, v, ok := find(spec, "deletionPolicy"); ok {
		if s, _ := v.(string); strings.EqualFold(s, PolicyRetain) {
			return PolicyRetain
		}
	}
	return PolicyDelete
}
