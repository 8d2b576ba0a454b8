package scenario

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ontap-csi/ontap-csi/test/kubelet/harness"
)

// Result is what one scenario run measured.
type Result struct {
	// Kubelet is the kubelet version the run used.
	Kubelet string
	// Gap is the total time, inside the scenario's window, in which kubelet
	// did not have the driver (CSI plugin or CSINode); GapOpen means it was
	// still missing when the run ended.
	Gap     time.Duration
	GapOpen bool
	// ServedGap is the total time in which kubelet's calls went unserved.
	ServedGap time.Duration
	// FirstRegistered is the time from the first pod's start to kubelet's
	// registration of it; NextRegistered the same for the successor.
	FirstRegistered time.Duration
	NextRegistered  time.Duration
}

// Timeouts for what the design bounds far lower. They only keep a broken
// binary from hanging the suite.
const (
	registerTimeout = 30 * time.Second
	exitTimeout     = harness.DefaultGracePeriod + 10*time.Second
	// settle outlasts the 2 s a retired socket lingers as a dot-file and a
	// couple of reconciler periods, so late effects show up in the window.
	settle = 3 * time.Second
	// gcTimeout bounds the wait for the holder's periodic garbage collection.
	gcTimeout = time.Minute
)

// checker holds a scenario's node and asserts on its timeline.
type checker struct {
	*harness.Node
}

// bound reports a measured time against the design's bound. It fails the
// test when the time exceeds -fail-bound, or the design's bound with -strict.
func (c checker) bound(what string, got, limit time.Duration) {
	c.T.Helper()
	verdict := "within"
	if got > limit {
		verdict = "EXCEEDS"
	}
	msg := what + ": " + got.Round(time.Millisecond).String() + " (" + verdict + " design bound " + limit.String() + ")"
	switch {
	case got > *failBound:
		c.T.Errorf("%s, over the failure bound %s", msg, *failBound)
	case got > limit && *strict:
		c.T.Error(msg)
	default:
		c.Step("%s", msg)
	}
}

// noDeregGap asserts kubelet kept the driver throughout [from, to].
func (c checker) noDeregGap(from, to time.Time) []harness.Interval {
	c.T.Helper()
	gaps := c.DeregGaps(from, to)
	if len(gaps) > 0 {
		c.T.Errorf("kubelet lost the driver: %s", harness.FormatIntervals(gaps, c.TL.Start()))
	}
	if d := c.Deregistrations(from); len(d) > 0 {
		c.T.Errorf("kubelet called DeRegisterPlugin %d times, first at %+.3fs", len(d), d[0].At.Sub(c.TL.Start()).Seconds())
	}
	return gaps
}

// allServed asserts every kubelet call in [from, to] was served.
func (c checker) allServed(from, to time.Time) []harness.Interval {
	c.T.Helper()
	gaps := c.ServedGaps(from, to)
	if len(gaps) > 0 {
		c.T.Errorf("kubelet calls not served: %s", harness.FormatIntervals(gaps, c.TL.Start()))
	}
	return gaps
}

// endsOn asserts the end state: the lease names pod as holder, kubelet has
// the lease's generation registered, and its calls are served. The holder
// may have registered more than once on the way (a confirming registration
// after a watchdog re-registration, say); only the end state counts.
func (c checker) endsOn(pod *harness.Pod) {
	c.T.Helper()
	if !pod.Running("ontap-csi") {
		c.T.Errorf("%s is not running at the end", pod.Name)
	}
	l := c.Obs.Lease()
	if !c.Holder(pod) {
		c.T.Errorf("lease does not name %s (pid %d) as holder: %s", pod.Name, pod.PID("ontap-csi"), l)
	}
	if got, ok := c.RegisteredGeneration(); !ok || got != l.Generation {
		c.T.Errorf("kubelet ends with generation %d registered (registered: %t), want the lease's %d", got, ok, l.Generation)
	}
	if regs := c.Registrations(time.Time{}); len(regs) > 0 && regs[len(regs)-1].Endpoint != c.Endpoint() {
		c.T.Errorf("kubelet's endpoint for the driver is %s, want E = %s (I3)", regs[len(regs)-1].Endpoint, c.Endpoint())
	}
	if !c.ServedNow() {
		c.T.Errorf("kubelet calls are not served at the end")
	}
}

// noCrash asserts none of the pods' ontap-csi containers exited on its own.
func (c checker) noCrash(pods ...*harness.Pod) {
	c.T.Helper()
	for _, p := range pods {
		if cr := p.Crashes("ontap-csi"); len(cr) > 0 {
			c.T.Errorf("%s/ontap-csi exited without being deleted: %v", p.Name, cr)
		}
	}
}

// deleteAndWait deletes pod and waits for its containers to exit.
func (c checker) deleteAndWait(p *harness.Pod) time.Time {
	c.T.Helper()
	p.Delete(harness.DefaultGracePeriod)
	if !p.Wait(exitTimeout) {
		c.T.Fatalf("%s did not exit", p.Name)
	}
	return time.Now()
}

// waitAll waits for deleted pods to exit.
func (c checker) waitAll(pods []*harness.Pod) {
	c.T.Helper()
	for _, p := range pods {
		if !p.Wait(exitTimeout) {
			c.T.Fatalf("%s did not exit", p.Name)
		}
	}
}

// startHolder starts an ontap-csi pod on a node where it will be the only
// one and waits until kubelet registered it and serves through it.
func (c checker) startHolder(name string, o harness.OntapOptions) (*harness.Pod, harness.TimedCall) {
	c.T.Helper()
	c.Step("start %s", name)
	p := c.StartOntap(name, o)
	reg := c.WaitNewRegistration(p.Started, 0, registerTimeout)
	c.Step("kubelet registered %s: generation %d, %v after start", name, harness.Generation(reg.Versions), reg.At.Sub(p.Started).Round(time.Millisecond))
	c.waitAvailable()
	return p, reg
}

// waitAvailable waits until the samplers have seen the driver in the CSI
// plugin and in CSINode and a served call: the state every scenario's
// observation window starts from.
func (c checker) waitAvailable() {
	c.T.Helper()
	c.MustWait(registerTimeout, "the driver registered, in CSINode and served", func() bool {
		return c.RegisteredNow() && c.ServedNow()
	})
}

// successor starts pod name next to the running holder and waits until
// kubelet registered it above generation above.
func (c checker) waitSuccessor(p *harness.Pod, above uint64) harness.TimedCall {
	c.T.Helper()
	reg := c.WaitNewRegistration(p.Started, above, registerTimeout)
	c.Step("kubelet registered %s: generation %d, %v after start", p.Name, harness.Generation(reg.Versions), reg.At.Sub(p.Started).Round(time.Millisecond))
	return reg
}

// A generation socket is <driver>-g<G>-reg.sock, or a hashed name that still
// ends in -g<G>-reg.sock when the path would be too long (docs/design/registration.md §4).
var regSockName = regexp.MustCompile(`^[^.].*-g(\d+)-reg\.sock$`)

// generationSockets lists the generation registration sockets in
// plugins_registry (not dot-files), by generation.
func (c checker) generationSockets() map[uint64]string {
	out := map[uint64]string{}
	for _, name := range harness.DirNames(c.RegDir) {
		if m := regSockName.FindStringSubmatch(name); m != nil {
			g, _ := strconv.ParseUint(m[1], 10, 64)
			out[g] = name
		}
	}
	return out
}

// dotFiles lists the dot-files in dir.
func dotFiles(dir string) []string {
	var out []string
	for _, n := range harness.DirNames(dir) {
		if strings.HasPrefix(n, ".") {
			out = append(out, n)
		}
	}
	return out
}

// aliveFiles lists the g<G>.alive files in dir.
func aliveFiles(dir string) []string {
	var out []string
	for _, n := range harness.DirNames(dir) {
		if strings.HasSuffix(n, ".alive") && !strings.HasPrefix(n, ".") {
			out = append(out, n)
		}
	}
	return out
}

func maxGen(m map[uint64]string) uint64 {
	var keys []uint64
	for g := range m {
		keys = append(keys, g)
	}
	if len(keys) == 0 {
		return 0
	}
	return slices.Max(keys)
}
