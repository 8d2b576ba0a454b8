package backendconfigs

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Phases of a TridentBackendConfig, Trident's values.
const (
	PhaseUnbound  = ""
	PhaseBound    = "Bound"
	PhaseDeleting = "Deleting"
	PhaseUnknown  = "Unknown"
	PhaseLost     = "Lost"
)

// Results of the last operation (status.lastOperationStatus).
const (
	OperationSuccess = "Success"
	OperationFailed  = "Failed"
)

// Status is a TridentBackendConfig's status, with Trident's field names.
type Status struct {
	Message             string
	BackendName         string
	BackendUUID         string
	DeletionPolicy      string
	Phase               string
	LastOperationStatus string
}

func statusOf(obj *unstructured.Unstructured) Status {
	str := func(path ...string) string {
		v, _, _ := unstructured.NestedString(obj.Object, append([]string{"status"}, path...)...)
		return v
	}
	return Status{
		Message:             str("message"),
		BackendName:         str("backendInfo", "backendName"),
		BackendUUID:         str("backendInfo", "backendUUID"),
		DeletionPolicy:      str("deletionPolicy"),
		Phase:               str("phase"),
		LastOperationStatus: str("lastOperationStatus"),
	}
}

// mayHoldVolumes reports whether a phase says a backend was made from the
// resource, by us or by Trident, so that volumes may live on it.
func mayHoldVolumes(phase string) bool { return phase != PhaseUnbound }

func (s Status) object() map[string]any {
	return map[string]any{
		"message": s.Message,
		"backendInfo": map[string]any{
			"backendName": s.BackendName,
			"backendUUID": s.BackendUUID,
		},
		"deletionPolicy":      s.DeletionPolicy,
		"phase":               s.Phase,
		"lastOperationStatus": s.LastOperationStatus,
	}
}

// writeStatus sets obj's status unless it already is st. obj must be the
// latest version known: a conflict is returned and the caller retries.
func (w *Watcher) writeStatus(ctx context.Context, obj *unstructured.Unstructured, st Status) (*unstructured.Unstructured, error) {
	if statusOf(obj) == st {
		return obj, nil
	}
	obj = obj.DeepCopy()
	if err := unstructured.SetNestedField(obj.Object, st.object(), "status"); err != nil {
		return nil, err
	}
	updated, err := w.client.UpdateStatus(ctx, obj, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("status of TridentBackendConfig %s: %w", obj.GetName(), err)
	}
	return updated, nil
}
