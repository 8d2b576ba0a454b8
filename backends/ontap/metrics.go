package ontap

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// driftedRules counts export rules that a publish found changed on ONTAP
// (other clients or access than the driver grants) and replaced (Trident
// #965, #1181). A rule that is simply missing is added without counting:
// statelessly, a vanished rule cannot be told from a node's first publish.
// A rising count means something else edits the policies.
var driftedRules = promauto.NewCounterVec(prometheus.CounterOpts{
	Namespace: "ontap_csi",
	Name:      "export_rules_repaired_total",
	Help:      "Export rules that ControllerPublishVolume found drifted on ONTAP and replaced, by backend.",
}, []string{"backend"})

// poolsCreated and poolsDeleted count the FlexVols the economy drivers
// made and removed as pools, by backend.
var (
	poolsCreated = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: "ontap_csi",
		Name:      "economy_pools_created_total",
		Help:      "Pool FlexVols an economy backend created, by backend.",
	}, []string{"backend"})
	poolsDeleted = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: "ontap_csi",
		Name:      "economy_pools_deleted_total",
		Help:      "Empty pool FlexVols an economy backend deleted, by backend.",
	}, []string{"backend"})
)
