package rest

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Labels carry the endpoint template ("POST /storage/volumes",
// "GET /cluster/jobs/{uuid}"), never a UUID or name, so cardinality stays
// bounded by the number of endpoints the client knows.
var (
	requestDuration = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "ontap_csi",
		Subsystem: "ontap",
		Name:      "request_duration_seconds",
		Help:      "Duration of HTTP requests to ONTAP, per attempt, by endpoint.",
		Buckets:   []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"endpoint"})

	errorsTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: "ontap_csi",
		Subsystem: "ontap",
		Name:      "request_errors_total",
		Help:      "ONTAP calls that failed after retries, by endpoint and error class.",
	}, []string{"endpoint", "class"})

	retriesTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: "ontap_csi",
		Subsystem: "ontap",
		Name:      "request_retries_total",
		Help:      "ONTAP requests retried, by endpoint and reason (429, 503, connection).",
	}, []string{"endpoint", "reason"})
)
