package node

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

var limiterWaitSeconds = promauto.NewHistogramVec(prometheus.HistogramOpts{
	Namespace: "ontap_csi",
	Subsystem: "node",
	Name:      "concurrency_wait_seconds",
	Help:      "Time node operations waited for a slot under a concurrency cap (iscsi, nfs_mount, mkfs).",
	Buckets:   []float64{0.001, 0.01, 0.1, 0.5, 1, 5, 15, 60},
}, []string{"limiter"})

// limiter caps how many operations of a kind run at once. Callers beyond the
// cap wait for a slot for as long as their context allows, rather than fail:
// kubelet would only retry them later.
type limiter struct {
	name  string
	slots chan struct{}
}

func newLimiter(name string, n int) *limiter {
	return &limiter{name: name, slots: make(chan struct{}, n)}
}

// acquire waits for a slot; release it exactly once.
func (l *limiter) acquire(ctx context.Context) (release func(), err error) {
	start := time.Now()
	select {
	case l.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	limiterWaitSeconds.WithLabelValues(l.name).Observe(time.Since(start).Seconds())
	return func() { <-l.slots }, nil
}
