package registration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// KubeAPI is the node plugin's optional access to the Kubernetes API. It is
// the dynamic client and a plain HTTP GET: client-go's typed clientset would
// link every API group's types into the binary, and Go initialises them in
// every role at start-up, which costs the node plugin ~10 MiB of RSS.
type KubeAPI struct {
	// Client reads this node's CSINode.
	Client dynamic.Interface
	// Ping returns nil if the API server answers.
	Ping func(ctx context.Context) error
}

var csinodesGVR = schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "csinodes"}

// NewKubeAPI is access to the API server of cfg over hc, the HTTP client
// the process shares among its users of the API. Ping asks GET /version,
// which any authenticated client may read.
func NewKubeAPI(cfg *rest.Config, hc *http.Client) (*KubeAPI, error) {
	cfg = dynamic.ConfigFor(cfg)
	client, err := dynamic.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	base, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, err
	}
	version := base.JoinPath("version").String()
	return &KubeAPI{Client: client, Ping: func(ctx context.Context) error { return getOK(ctx, hc, version) }}, nil
}

// getOK is a GET that succeeds on 200 OK.
func getOK(ctx context.Context, hc *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	// Drain (bounded) so the connection is reused by the CSINode watch.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// waitForAPI is Acquire step 4: kubelet's RegisterPlugin updates the Node and
// CSINode objects, and if the API server does not answer it unregisters the
// driver by name (K5), which would drop a predecessor's good registration.
// The wait is bounded; a SIGTERM ends it (false: do not register).
func (m *Manager) waitForAPI() bool {
	abort := m.sigterm.signal.Done()
	if m.sigterm.received {
		abort = nil
	}
	deadline := time.Now().Add(m.timings.apiWait)
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(m.life, 5*time.Second)
		err := m.cfg.Kube.Ping(ctx)
		cancel()
		if err == nil {
			if i > 0 {
				m.log.Info("API server answers; registering")
			}
			return true
		}
		if i == 0 {
			m.log.WithError(err).Warn("waiting for the API server before registering, or kubelet would drop the driver (K5)")
		}
		if time.Now().After(deadline) {
			m.log.WithError(err).WithField("waited", m.timings.apiWait).Error("API server still unreachable; registering anyway")
			return true
		}
		select {
		case <-abort:
			return false
		case <-time.After(time.Second):
		}
	}
}
