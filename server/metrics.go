package server

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

var operationSeconds = promauto.NewHistogramVec(prometheus.HistogramOpts{
	Name: "csi_plugin_operations_seconds",
	Help: "Duration of CSI calls served by this plugin, by method and gRPC status code.",
	// Node calls span from sub-millisecond info calls to minutes of mkfs.
	Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
}, []string{"method", "grpc_status_code"})
