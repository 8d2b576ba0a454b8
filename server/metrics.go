package server

import (
	"strconv"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

var operationSeconds = promauto.NewHistogramVec(prometheus.HistogramOpts{
	Name: "csi_plugin_operations_seconds",
	Help: "Duration of CSI calls served by this plugin, by method and gRPC status code.",
	// Node calls span from sub-millisecond info calls to minutes of mkfs.
	Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
}, []string{"method", "grpc_status_code"})

// Trident's build info and operation summary (core/metrics/metrics.go),
// with its names, help texts and labels.
var (
	tridentBuildInfo = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "trident",
		Name:      "build_info",
		Help:      "Trident build and release information",
	}, []string{"trident_revision", "trident_version", "build_type"})

	tridentOperationDuration = promauto.NewSummaryVec(prometheus.SummaryOpts{
		Namespace:  "trident",
		Name:       "operation_duration_milliseconds",
		Help:       "The duration of operations by backend",
		Objectives: map[float64]float64{0.5: 0.05, 0.9: 0.01, 0.99: 0.001},
	}, []string{"operation", "success"})
)

// SetTridentBuildInfo sets trident_build_info: the Trident release the
// binary stands in for, and ontap-csi's own version as the revision.
// build_type is "custom", Trident's value for a build that is not one of
// its releases.
func SetTridentBuildInfo(tridentVersion string) {
	tridentBuildInfo.Reset()
	tridentBuildInfo.WithLabelValues(Version, tridentVersion, "custom").Set(1)
}

// ObserveTridentOperation records an operation under Trident's name for it
// (backend_add, node_add, ...).
func ObserveTridentOperation(operation string, start time.Time, err error) {
	tridentOperationDuration.WithLabelValues(operation, strconv.FormatBool(err == nil)).
		Observe(float64(time.Since(start).Milliseconds()))
}

// tridentOperation is Trident's name for what a controller CSI call does
// in Trident's core, "" for calls Trident does not time.
func tridentOperation(method string, req any) string {
	switch method {
	case "CreateVolume":
		if r, ok := req.(*csi.CreateVolumeRequest); ok && r.GetVolumeContentSource() != nil {
			return "volume_clone"
		}
		return "volume_add"
	case "DeleteVolume":
		return "volume_delete"
	case "ControllerPublishVolume":
		return "volume_publish"
	case "ControllerUnpublishVolume":
		return "volume_unpublish"
	case "ControllerExpandVolume":
		return "volume_resize"
	case "ListVolumes":
		return "volume_list"
	case "ControllerGetVolume":
		return "volume_get"
	case "CreateSnapshot":
		return "snapshot_create"
	case "DeleteSnapshot":
		return "snapshot_delete"
	case "ListSnapshots":
		return "snapshot_list"
	}
	return ""
}
