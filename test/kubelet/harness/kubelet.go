// Package harness runs node-plugin processes against the real kubelet
// registration code and records what kubelet sees, sample by sample.
//
// The package is version-neutral: it knows nothing of k8s.io/kubernetes. Each
// Kubernetes version lives in its own Go module (test/kubelet for v1.37,
// test/kubelet/k8s-1.19, test/kubelet/k8s-1.29) whose realkubelet package
// implements Kubelet with that version's plugin manager and CSI plugin.
package harness

import (
	"context"
	"io"
	"strings"
)

const (
	// Driver is the CSI driver name under test. Adapters use it as an untyped
	// constant because some kubelet entry points take an unexported name type.
	Driver = "csi.trident.netapp.io"

	// NodeName is the Node object the fake clientset holds and the node the
	// plugins claim in NodeGetInfo.
	NodeName = "node1"

	// ProbeEndpoint is the endpoint passed to ValidatePlugin when probing. It is
	// never registered (ValidatePlugin has no side effects); the marker lets the
	// kubelet log filter drop the probe's log line.
	ProbeEndpoint = "/harness-probe/endpoint"
)

// Kubelet is the kubelet side of the node: the real plugin manager and the
// real CSI plugin of one Kubernetes version, run in this process.
//
// The CSI plugin keeps its state in package variables, so there can be one
// Kubelet per process.
type Kubelet interface {
	// Version is the k8s.io/kubernetes module version, e.g. "v1.37.2".
	Version() string
	// Start runs a fresh plugin manager on <root>/plugins_registry with the
	// CSI handler. The watcher's initial walk has finished when it returns.
	Start() error
	// Stop stops the plugin manager. The CSI plugin keeps what it registered,
	// as a stopped kubelet process would have nothing at all: call Forget
	// before the next Start to emulate a kubelet restart.
	Stop()
	// Forget drops the driver from the CSI plugin's in-memory state, as a
	// kubelet restart does. It goes through DeRegisterPlugin, which also
	// removes the CSINode entry; a real restart would leave that in place.
	Forget()
	// Registered reports whether the CSI plugin has Driver registered with a
	// highest version >= version. It asks ValidatePlugin, which fails exactly
	// when such a registration exists and has no side effects.
	Registered(version string) bool
	// CSINodeHasDriver reports whether the CSINode object lists Driver.
	CSINodeHasDriver(ctx context.Context) (bool, error)
	// Call makes one kubelet CSI call the way kubelet makes them: look Driver
	// up among the registered drivers, dial its endpoint afresh and call the
	// Node service (the volume-stats path kubelet runs for mounted volumes).
	Call(ctx context.Context) CallResult
}

// KubeletConfig configures a Kubelet.
type KubeletConfig struct {
	// Root is the kubelet root directory (--root-dir); the plugin manager
	// watches Root/plugins_registry.
	Root string
	// Log receives kubelet's klog output. Nil discards it.
	Log io.Writer
	// OnHandlerCall is told about every call the plugin manager makes into
	// the CSI handler, after the handler returned.
	OnHandlerCall func(HandlerCall)
}

// HandlerOp names a CSI handler method.
type HandlerOp string

// The CSI handler methods the plugin manager calls.
const (
	OpValidate   HandlerOp = "ValidatePlugin"
	OpRegister   HandlerOp = "RegisterPlugin"
	OpDeregister HandlerOp = "DeRegisterPlugin"
)

// HandlerCall is one call of the plugin manager into the CSI handler.
type HandlerCall struct {
	Op       HandlerOp
	Name     string
	Endpoint string
	Versions []string
	Err      string
}

// Outcome classifies a kubelet CSI call.
type Outcome int

// Outcomes of a kubelet CSI call.
const (
	// Served: the driver was registered and a process answered on its endpoint.
	Served Outcome = iota
	// NotRegistered: kubelet's lookup failed with "driver name ... not found in
	// the list of registered CSI drivers", the error of the seed bug.
	NotRegistered
	// Unreachable: registered, but nothing answered on the endpoint.
	Unreachable
)

func (o Outcome) String() string {
	switch o {
	case Served:
		return "served"
	case NotRegistered:
		return "not-registered"
	default:
		return "unreachable"
	}
}

// CallResult is the outcome of Kubelet.Call with the error behind it.
type CallResult struct {
	Outcome Outcome
	Err     string
}

// notRegisteredMsg is the text of newCsiDriverClient's lookup failure,
// unchanged from v1.19 to v1.37.
const notRegisteredMsg = "not found in the list of registered CSI drivers"

// ClassifyCall turns the error of a kubelet CSI call into a CallResult. code
// is the gRPC status code name carried by err ("Unavailable", ...), or "" if
// err carries no status. An answer from the driver, even an error status,
// means the call was served; a transport failure, or a lookup that found no
// driver, means it was not. Adapters treat kubelet's "metrics not supported"
// (the driver answered NodeGetCapabilities without GET_VOLUME_STATS) as served
// before calling this.
func ClassifyCall(err error, code string) CallResult {
	if err == nil {
		return CallResult{Outcome: Served}
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, notRegisteredMsg):
		return CallResult{Outcome: NotRegistered, Err: msg}
	case code == "", code == "Unavailable", code == "DeadlineExceeded", code == "Canceled":
		return CallResult{Outcome: Unreachable, Err: msg}
	default:
		return CallResult{Outcome: Served, Err: msg}
	}
}

// KlogFilter wraps w and drops the log lines caused by the harness's own
// probes: every line containing "harness-probe" and the lines of the extra
// substrings an adapter names (the CSI client logs each dial it makes). The
// kubelet log then shows what the plugin manager did rather than hundreds of
// probe lines a second.
func KlogFilter(w io.Writer, drop ...string) io.Writer {
	if w == nil {
		return io.Discard
	}
	return filterWriter{w: w, drop: append([]string{"harness-probe"}, drop...)}
}

type filterWriter struct {
	w    io.Writer
	drop []string
}

func (f filterWriter) Write(p []byte) (int, error) {
	for _, d := range f.drop {
		if strings.Contains(string(p), d) {
			return len(p), nil
		}
	}
	return f.w.Write(p)
}
