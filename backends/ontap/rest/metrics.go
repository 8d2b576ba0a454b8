package rest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

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

// Trident's series for the requests its ONTAP clients send, so that its
// dashboards keep working: per SVM and operation, as its ZAPI client
// counts them (storage_drivers/ontap/api/azgo/metrics.go; op is the
// endpoint template here, the ZAPI name there), and Trident 26.06's
// outgoing-API series, which its REST client feeds (logging/telemeter.go,
// target "ontap"). Every attempt is one sample, as every ZAPI or HTTP
// request is in Trident.
var (
	tridentOpsTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: "trident",
		Subsystem: "ontap",
		Name:      "ops_total",
		Help:      "The total number of handled ONTAP ZAPI operations",
	}, []string{"svm", "op"})

	tridentOpsDuration = promauto.NewSummaryVec(prometheus.SummaryOpts{
		Namespace:  "trident",
		Subsystem:  "ontap",
		Name:       "operation_duration_in_milliseconds_by_svm",
		Help:       "The duration of operations by SVM",
		Objectives: map[float64]float64{0.5: 0.05, 0.9: 0.01, 0.99: 0.001},
	}, []string{"svm", "op"})

	outgoingLabels = []string{"target", "address", "method"}

	outgoingDuration = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "trident",
		Subsystem: "outgoing_api",
		Name:      "request_duration_seconds",
		Help:      "Duration of calls to external APIs from start to finish.",
		Buckets:   []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 10},
	}, append([]string{"status"}, outgoingLabels...))

	outgoingInFlight = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "trident",
		Subsystem: "outgoing_api",
		Name:      "requests_in_flight",
		Help:      "Number of in-flight outgoing API requests.",
	}, outgoingLabels)

	outgoingRetried = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: "trident",
		Subsystem: "outgoing_api",
		Name:      "requests_retried_total",
		Help:      "Total number of outgoing API requests that were retried.",
	}, outgoingLabels)

	outgoingBackpressure = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: "trident",
		Subsystem: "outgoing_api",
		Name:      "requests_backpressure_total",
		Help:      "Total number of outgoing API requests that were rejected by the server due to overload (e.g. 429, 503, EOF).",
	}, outgoingLabels)
)

// outgoingTarget is Trident's target label of requests to ONTAP.
const outgoingTarget = "ontap"

// observeTrident records one request in Trident's series. status is the
// HTTP status, 0 when there was no response; err the transport error.
func observeTrident(ctx context.Context, svm, op, address, method string, status int, err error, elapsed time.Duration) {
	tridentOpsTotal.WithLabelValues(svm, op).Inc()
	tridentOpsDuration.WithLabelValues(svm, op).Observe(float64(elapsed.Milliseconds()))
	// Trident's outcome: an HTTP answer is a success unless ONTAP pushed
	// back (429, 503, 504, or EOF instead of an answer).
	result := "success"
	backpressure := status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable ||
		status == http.StatusGatewayTimeout || errors.Is(err, io.EOF)
	switch {
	case err == nil && !backpressure:
	case errors.Is(ctx.Err(), context.Canceled):
		result = "canceled"
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		result = "deadline_exceeded"
	default:
		result = "failure"
	}
	if backpressure {
		outgoingBackpressure.WithLabelValues(outgoingTarget, address, method).Inc()
	}
	outgoingDuration.WithLabelValues(result, outgoingTarget, address, method).Observe(elapsed.Seconds())
}
