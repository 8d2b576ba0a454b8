// Command kubeletsim runs the real kubelet registration code of
// k8s.io/kubernetes v1.37.2 (plugin manager + CSI plugin, fake API server)
// against a kubelet root directory and prints, as they happen, what kubelet
// does and sees of the CSI driver csi.trident.netapp.io: every call into the
// CSI handler, every change of the sampled availability (registered in the
// CSI plugin, listed in CSINode, calls served), the sockets coming and going
// in plugins_registry and the plugin dir, and the node lease.
//
// It is the kubelet half of the demo: start it, then run node plugins
// against the same --root. On SIGINT or SIGTERM it prints a summary of the
// deregistration gaps and exits.
//
//	kubeletsim --root /tmp/demo/kubelet [--json] [--kubelet-log kubelet.log]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ontap-csi/ontap-csi/test/kubelet/harness"
	"github.com/ontap-csi/ontap-csi/test/kubelet/realkubelet"
)

func main() {
	root := flag.String("root", "", "kubelet root directory; plugins_registry and plugins/ are created in it")
	asJSON := flag.Bool("json", false, "print events as JSON lines")
	klogPath := flag.String("kubelet-log", "", "write kubelet's own log (klog) to this file")
	flag.Parse()
	if *root == "" || !filepath.IsAbs(*root) {
		fmt.Fprintln(os.Stderr, "kubeletsim: --root must be an absolute path")
		os.Exit(2)
	}
	if err := run(*root, *asJSON, *klogPath); err != nil {
		fmt.Fprintf(os.Stderr, "kubeletsim: %v\n", err)
		os.Exit(1)
	}
}

func run(root string, asJSON bool, klogPath string) error {
	paths := harness.NewPaths(root)
	for _, d := range []string{paths.RegDir, paths.PluginDir} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return err
		}
	}
	var klogOut io.Writer
	if klogPath != "" {
		f, err := os.Create(klogPath)
		if err != nil {
			return err
		}
		defer f.Close()
		klogOut = f
	}
	out := &output{asJSON: asJSON, tl: harness.NewTimeline()}
	out.tl.Subscribe(out.event)

	real, err := realkubelet.New(nil, harness.KubeletConfig{Root: root, Log: klogOut, OnHandlerCall: out.call})
	if err != nil {
		return err
	}
	k := &countingKubelet{Kubelet: real}
	out.tl.Add(harness.KindKubelet, "kubelet %s: plugin manager watching %s", k.Version(), paths.RegDir)
	if err := k.Start(); err != nil {
		return err
	}
	obs := harness.NewObserver(k, out.tl, root)
	if err := obs.Start(); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	end := time.Now()
	obs.Stop()
	k.Stop()

	sum := summarize(out.tl, end)
	sum.Kubelet = k.Version()
	sum.Calls, sum.FailedCalls, sum.FirstFailure, sum.LastFailure = k.counts()
	out.summary(sum)
	return nil
}

// output prints the timeline and the summary, as text or as JSON lines.
type output struct {
	asJSON bool
	tl     *harness.Timeline
	mu     sync.Mutex // one line at a time on stdout
}

func (o *output) emit(v any) {
	b, _ := json.Marshal(v)
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Println(string(b))
}

func (o *output) event(e harness.Event) {
	if o.asJSON {
		o.emit(jsonEvent{T: e.At.Sub(o.tl.Start()).Seconds(), At: e.At.Format(time.RFC3339Nano), Kind: string(e.Kind), Text: e.Text})
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Println(o.tl.Format(e))
}

func (o *output) call(c harness.HandlerCall) {
	o.tl.Call(c)
	if o.asJSON {
		// The same call once more with its fields, for programs that
		// follow the registrations (the demo).
		now := time.Now()
		o.emit(jsonEvent{T: now.Sub(o.tl.Start()).Seconds(), At: now.Format(time.RFC3339Nano), Kind: "call", Op: string(c.Op),
			Endpoint: c.Endpoint, Versions: c.Versions, Err: c.Err})
	}
}

func (o *output) summary(sum summary) {
	if o.asJSON {
		o.emit(sum)
		return
	}
	if sum.FirstRegistered < 0 {
		fmt.Println("# summary: the driver was never registered")
		return
	}
	fmt.Printf("# summary: first registered at %+.3fs; deregistration gaps after it: %s (total %v)\n",
		sum.FirstRegistered, formatGaps(sum.DeregGaps), time.Duration(sum.DeregMillis*float64(time.Millisecond)).Round(time.Millisecond))
	fmt.Printf("# summary: kubelet calls: %d made, %d not served (%s) %s\n", sum.Calls, sum.FailedCalls, formatGaps(sum.UnservedGaps), sum.FirstFailure)
	fmt.Printf("# summary: %d registrations, %d deregistrations; %d samples of the registration, %d of them more than %v apart; registered at the end: %t\n",
		sum.Registrations, sum.Deregistrations, sum.RegisteredSamples, sum.LateSamples, harness.MaxSampleSpacing, sum.EndsRegistered)
}

// jsonEvent is one line of --json output: a timeline event, or (kind
// "call") one call of the plugin manager into the CSI handler.
type jsonEvent struct {
	T        float64  `json:"t"`
	At       string   `json:"at,omitempty"`
	Kind     string   `json:"kind"`
	Text     string   `json:"text,omitempty"`
	Op       string   `json:"op,omitempty"`
	Endpoint string   `json:"endpoint,omitempty"`
	Versions []string `json:"versions,omitempty"`
	Err      string   `json:"err,omitempty"`
}

// gap is an interval, in seconds since kubeletsim started.
type gap struct {
	From float64 `json:"from"`
	To   float64 `json:"to"`
	Open bool    `json:"open,omitempty"` // still open at the end
}

// summary is what kubeletsim saw of the driver over its run; with --json
// it is the last line, kind "summary".
type summary struct {
	Kind    string `json:"kind"`
	Kubelet string `json:"kubelet"`
	// FirstRegistered is when kubelet first had the driver in the CSI
	// plugin and in CSINode, or -1.
	FirstRegistered float64 `json:"firstRegistered"`
	// DeregGaps are the times after that without the driver.
	DeregGaps   []gap   `json:"deregGaps"`
	DeregMillis float64 `json:"deregMillis"`
	// Calls are kubelet CSI calls made the way kubelet makes them (lookup
	// among the registered drivers, dial, NodeGetVolumeStats) after the
	// first served one; FailedCalls went unserved, FirstFailure says why.
	Calls        int    `json:"calls"`
	FailedCalls  int    `json:"failedCalls"`
	UnservedGaps []gap  `json:"unservedGaps"`
	FirstFailure string `json:"firstFailure,omitempty"`
	LastFailure  string `json:"lastFailure,omitempty"`
	// Registrations and Deregistrations count the plugin manager's
	// successful RegisterPlugin and its DeRegisterPlugin calls.
	Registrations     int  `json:"registrations"`
	Deregistrations   int  `json:"deregistrations"`
	RegisteredSamples int  `json:"registeredSamples"`
	LateSamples       int  `json:"lateSamples"`
	EndsRegistered    bool `json:"endsRegistered"`
}

func summarize(tl *harness.Timeline, end time.Time) summary {
	sum := summary{Kind: "summary", FirstRegistered: -1, DeregGaps: []gap{}, UnservedGaps: []gap{}}
	rel := func(t time.Time) float64 { return t.Sub(tl.Start()).Seconds() }
	gaps := func(ivs []harness.Interval) []gap {
		out := []gap{}
		for _, iv := range ivs {
			out = append(out, gap{From: rel(iv.From), To: rel(iv.To), Open: iv.Open})
		}
		return out
	}
	reg := tl.Series(harness.SigRegistered)
	sum.RegisteredSamples, sum.LateSamples = reg.Samples, reg.Late
	for _, c := range tl.Calls(harness.OpRegister, tl.Start()) {
		if c.Err == "" {
			sum.Registrations++
		}
	}
	sum.Deregistrations = len(tl.Calls(harness.OpDeregister, tl.Start()))
	ok, _ := reg.At(end)
	csinode, _ := tl.Series(harness.SigCSINode).At(end)
	sum.EndsRegistered = ok && csinode

	// The driver is absent until its first registration; what counts is
	// every absence after kubelet first had it in the CSI plugin and CSINode.
	absent := harness.Union(reg.Gaps(tl.Start(), end), tl.Series(harness.SigCSINode).Gaps(tl.Start(), end))
	if len(absent) == 0 || absent[0].Open {
		return sum
	}
	sum.FirstRegistered = rel(absent[0].To)
	sum.DeregGaps = gaps(absent[1:])
	sum.DeregMillis = float64(harness.Total(absent[1:]).Microseconds()) / 1000

	served := tl.Series(harness.SigServed)
	firstServed, ok := served.FirstTrue(tl.Start())
	if !ok {
		return sum
	}
	sum.UnservedGaps = gaps(served.Gaps(firstServed, end))
	return sum
}

// countingKubelet counts the observer's kubelet CSI calls from the first
// served one on: the calls before it were made before any plugin ran.
type countingKubelet struct {
	harness.Kubelet
	mu                 sync.Mutex
	calls, failed      int
	firstFailure, last string
}

func (k *countingKubelet) Call(ctx context.Context) harness.CallResult {
	r := k.Kubelet.Call(ctx)
	if ctx.Err() != nil {
		return r // the observer stopping, not a kubelet call
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if r.Outcome == harness.Served || k.calls > 0 {
		k.calls++
		if r.Outcome != harness.Served {
			k.failed++
			k.last = r.Outcome.String() + ": " + r.Err
			if k.firstFailure == "" {
				k.firstFailure = k.last
			}
		}
	}
	return r
}

func (k *countingKubelet) counts() (calls, failed int, first, last string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.calls, k.failed, k.firstFailure, k.last
}

func formatGaps(gs []gap) string {
	if len(gs) == 0 {
		return "none"
	}
	var b strings.Builder
	for i, g := range gs {
		if i > 0 {
			b.WriteString(", ")
		}
		end := fmt.Sprintf("%+.3fs", g.To)
		if g.Open {
			end = "end (still open)"
		}
		fmt.Fprintf(&b, "%+.3fs..%s", g.From, end)
	}
	return b.String()
}
