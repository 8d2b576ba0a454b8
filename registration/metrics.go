package registration

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Reasons for an acquisition that is not a re-registration.
const (
	reasonStart    = "start"    // this process's first generation
	reasonTakeover = "takeover" // from a dead holder, or over a damaged lease
)

// Reasons for a re-registration: the holder registers a new generation.
const (
	reasonValidationFailed   = "validation_failed"    // Notify(false): our version was not high enough
	reasonRegistrationFailed = "registration_failed"  // Notify(false): NodeGetInfo or CSINode update failed
	reasonSocketRemoved      = "socket_removed"       // our socket was deleted or replaced
	reasonOtherRemoved       = "other_socket_removed" // another socket that may carry our driver was unlinked
	reasonOtherCreated       = "other_socket_created" // a foreign socket re-used a path kubelet may hold
	reasonCSINodeMissing     = "csinode_missing"      // CSINode lacked our driver while registered
	reasonConfirm            = "confirm"              // second registration after kubelet's next reconcile
)

var (
	generationGauge = promauto.NewGauge(prometheus.GaugeOpts{
		Namespace: "ontap_csi", Subsystem: "registration", Name: "generation",
		Help: "Generation this process holds or last held on the node (0: none yet).",
	})
	phaseGauge = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "ontap_csi", Subsystem: "registration", Name: "phase",
		Help: "1 for this process's current registration phase: acquiring, starting, registered, standby or uninstalling.",
	}, []string{"phase"})
	handoversTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: "ontap_csi", Subsystem: "registration", Name: "handovers_total",
		Help: "Times this process took the node lease from another generation, by whether that generation was still alive.",
	}, []string{"predecessor"})
	reregistrationsTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: "ontap_csi", Subsystem: "registration", Name: "reregistrations_total",
		Help: "Registrations of a new generation by a process that already held the lease, by reason.",
	}, []string{"reason"})
)

func setRoleMetric(current role) {
	for _, r := range allRoles {
		v := 0.0
		if r == current {
			v = 1
		}
		phaseGauge.WithLabelValues(string(r)).Set(v)
	}
}
