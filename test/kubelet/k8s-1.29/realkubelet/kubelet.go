// Package realkubelet runs the kubelet registration code of k8s.io/kubernetes
// v1.29.15 in this process: the plugin manager that watches plugins_registry
// and the CSI plugin's RegistrationHandler, with a fake clientset for the Node
// and CSINode objects. It implements harness.Kubelet.
package realkubelet

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"k8s.io/kubernetes/pkg/kubelet/config"
	"k8s.io/kubernetes/pkg/kubelet/pluginmanager"
	"k8s.io/kubernetes/pkg/volume"
	"k8s.io/kubernetes/pkg/volume/csi"
	volumetest "k8s.io/kubernetes/pkg/volume/testing"

	"github.com/ontap-csi/ontap-csi/test/kubelet/harness"
)

// Version is the k8s.io/kubernetes version this package is built against.
const Version = "v1.29.15"

// Probe volume of Call: kubelet asks the driver for its stats as it does
// for every mounted CSI volume. No such volume exists; any answer will do.
const (
	probeVolumeID   = "harness-probe-volume"
	probeTargetPath = "/harness-probe/target"
)

type kubelet struct {
	cfg    harness.KubeletConfig
	client *fake.Clientset

	mu     sync.Mutex
	stopCh chan struct{}
	done   chan struct{}
}

// New creates the CSI plugin through the fake kubelet volume host that
// kubelet's own CSI tests use, against a fake clientset holding the Node.
// t is handed to the fake host, which only uses it to fail; pass nil outside
// tests.
func New(t *testing.T, cfg harness.KubeletConfig) (harness.Kubelet, error) {
	routeKlog(cfg.Log)

	client := fake.NewSimpleClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: harness.NodeName}})
	factory := informers.NewSharedInformerFactory(client, time.Minute)
	driverLister := factory.Storage().V1().CSIDrivers().Lister()
	attachLister := factory.Storage().V1().VolumeAttachments().Lister()
	stop := make(chan struct{})
	factory.Start(stop)
	factory.WaitForCacheSync(stop)

	// Creating the host runs csiPlugin.Init, which sets the package-level
	// node info manager behind PluginHandler and creates the CSINode object.
	err := harness.Guard(t, func(t *testing.T) {
		volumetest.NewFakeKubeletVolumeHostWithCSINodeName(t, cfg.Root, client,
			csi.ProbeVolumePlugins(), harness.NodeName, driverLister, attachLister)
	})
	if err != nil {
		return nil, fmt.Errorf("creating the CSI plugin: %w", err)
	}
	return &kubelet{cfg: cfg, client: client}, nil
}

func (k *kubelet) Version() string { return Version }

func (k *kubelet) Start() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.done != nil {
		return fmt.Errorf("plugin manager already running")
	}
	pm := pluginmanager.NewPluginManager(filepath.Join(k.cfg.Root, "plugins_registry"), &record.FakeRecorder{})
	pm.AddHandler(registerapi.CSIPlugin, recordingHandler{csi.PluginHandler, k.cfg.OnHandlerCall})

	k.stopCh, k.done = make(chan struct{}), make(chan struct{})
	ready := config.NewSourcesReady(func(sets.String) bool { return true })
	go func(stopCh <-chan struct{}, done chan<- struct{}) {
		defer close(done)
		pm.Run(ready, stopCh)
	}(k.stopCh, k.done)
	return nil
}

func (k *kubelet) Stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.done == nil {
		return
	}
	close(k.stopCh)
	<-k.done
	k.done = nil
}

func (k *kubelet) Forget() {
	csi.PluginHandler.DeRegisterPlugin(harness.Driver)
}

func (k *kubelet) Registered(version string) bool {
	return csi.PluginHandler.ValidatePlugin(harness.Driver, harness.ProbeEndpoint, []string{version}) != nil
}

func (k *kubelet) CSINodeHasDriver(ctx context.Context) (bool, error) {
	node, err := k.client.StorageV1().CSINodes().Get(ctx, harness.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, d := range node.Spec.Drivers {
		if d.Name == harness.Driver {
			return true, nil
		}
	}
	return false, nil
}

func (k *kubelet) Call(ctx context.Context) harness.CallResult {
	// GetMetrics carries its own 2-minute timeout; ctx bounds our wait only.
	errc := make(chan error, 1)
	go func() {
		_, err := csi.NewMetricsCsi(probeVolumeID, probeTargetPath, harness.Driver).GetMetrics()
		errc <- err
	}()
	select {
	case err := <-errc:
		if volume.IsNotSupported(err) {
			return harness.CallResult{Outcome: harness.Served, Err: err.Error()}
		}
		code := ""
		if s, ok := status.FromError(err); ok && err != nil {
			code = s.Code().String()
		}
		return harness.ClassifyCall(err, code)
	case <-ctx.Done():
		return harness.CallResult{Outcome: harness.Unreachable, Err: "no answer: " + ctx.Err().Error()}
	}
}

// recordingHandler passes every call through to the real CSI handler and
// reports it afterwards. It decides nothing.
type recordingHandler struct {
	h      *csi.RegistrationHandler
	record func(harness.HandlerCall)
}

func (r recordingHandler) ValidatePlugin(name, endpoint string, versions []string) error {
	err := r.h.ValidatePlugin(name, endpoint, versions)
	r.report(harness.OpValidate, name, endpoint, versions, err)
	return err
}

func (r recordingHandler) RegisterPlugin(name, endpoint string, versions []string) error {
	err := r.h.RegisterPlugin(name, endpoint, versions)
	r.report(harness.OpRegister, name, endpoint, versions, err)
	return err
}

func (r recordingHandler) DeRegisterPlugin(name string) {
	r.h.DeRegisterPlugin(name)
	r.report(harness.OpDeregister, name, "", nil, nil)
}

func (r recordingHandler) report(op harness.HandlerOp, name, endpoint string, versions []string, err error) {
	if r.record == nil {
		return
	}
	c := harness.HandlerCall{Op: op, Name: name, Endpoint: endpoint, Versions: versions}
	if err != nil {
		c.Err = err.Error()
	}
	r.record(c)
}

var klogOnce sync.Once

// routeKlog sends kubelet's klog output to w (or nowhere), at a verbosity
// that shows the plugin watcher and reconciler decisions.
func routeKlog(w io.Writer) {
	klogOnce.Do(func() {
		fs := flag.NewFlagSet("klog", flag.ContinueOnError)
		klog.InitFlags(fs)
		_ = fs.Set("logtostderr", "false")
		_ = fs.Set("alsologtostderr", "false")
		_ = fs.Set("stderrthreshold", "FATAL")
		_ = fs.Set("v", "5")
		klog.SetOutput(harness.KlogFilter(w, "NodeGetCapabilities rpc", "creating new gRPC connection"))
	})
}
