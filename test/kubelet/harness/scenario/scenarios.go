package scenario

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/ontap-csi/ontap-csi/test/kubelet/harness"
)

// Scenario is one row of docs/design/registration.md §6.
type Scenario struct {
	ID    string
	Title string
	Run   func(*harness.Node) Result
}

// The scenarios of docs/design/registration.md §6.
var (
	S1  = Scenario{"S1", "rolling update with surge: A registered, B starts and takes over, SIGTERM A", s1}
	S2  = Scenario{"S2", "seed: DaemonSet recreated, B starts, A gets SIGTERM 300 ms later", s2}
	S3  = Scenario{"S3", "A gets SIGTERM first, B starts 3 s later, within the grace", s3}
	S4  = Scenario{"S4", "A gets SIGTERM, no successor; then --deregister-on-shutdown=always", s4}
	S5  = Scenario{"S5", "holder SIGKILLed while a standby runs", s5}
	S6  = Scenario{"S6", "kubelet restarted mid-handover, both sockets present", s6}
	S7  = Scenario{"S7", "our registration socket deleted by hand", s7}
	S8  = Scenario{"S8", "legacy registrar sidecar in both pods, DaemonSet recreated (new first, then old first)", s8}
	S8o = Scenario{"S8o", "S8 in trident-operator's orders: DaemonSet deleted then created at once, then created once the old pod is gone", s8o}
	S9  = Scenario{"S9", "baseline: legacy registrar only, DaemonSet recreated: the seed bug", s9}
	S10 = Scenario{"S10", "three processes start at once", s10}
	S11 = Scenario{"S11", "rolling updates in a row", s11}
	S12 = Scenario{"S12", "ontap-csi deregister, then SIGTERM", s12}

	// Legacy baselines of S1–S3 for the benchmark: Trident 20.10's
	// DaemonSet (trident-main + node-driver-registrar) in the same steps.
	L1 = Scenario{"L1", "S1 with the legacy registrar DaemonSet", l1}
	L2 = Scenario{"L2", "S2 with the legacy registrar DaemonSet", l2}
	L3 = Scenario{"L3", "S3 with the legacy registrar DaemonSet", l3}
)

func s1(n *harness.Node) Result {
	c := checker{n}
	a, regA := c.startHolder("ds-a", harness.OntapOptions{})
	from := time.Now()
	c.Step("surge: start ds-b next to ds-a")
	b := c.StartOntap("ds-b", harness.OntapOptions{})
	regB := c.waitSuccessor(b, harness.Generation(regA.Versions))
	c.Step("rolling update: delete ds-a")
	c.deleteAndWait(a)
	c.Settle(settle)
	to := time.Now()

	gaps := c.noDeregGap(from, to)
	served := c.allServed(from, to)
	c.endsOn(b)
	c.noCrash(a, b)
	return Result{Gap: harness.Total(gaps), ServedGap: harness.Total(served),
		FirstRegistered: regA.At.Sub(a.Started), NextRegistered: regB.At.Sub(b.Started)}
}

func s2(n *harness.Node) Result {
	c := checker{n}
	a, regA := c.startHolder("ds-a", harness.OntapOptions{})
	from := time.Now()
	c.Step("DaemonSet recreated: start ds-b, delete ds-a 300 ms later")
	b := c.StartOntap("ds-b", harness.OntapOptions{})
	time.Sleep(300 * time.Millisecond)
	a.Delete(harness.DefaultGracePeriod)
	regB := c.waitSuccessor(b, harness.Generation(regA.Versions))
	if !a.Wait(exitTimeout) {
		c.T.Fatalf("ds-a did not exit")
	}
	c.Settle(settle)
	to := time.Now()

	gaps := c.noDeregGap(from, to)
	served := c.allServed(from, to) // I1: A serves E until B has taken it
	c.endsOn(b)
	c.noCrash(a, b)
	return Result{Gap: harness.Total(gaps), ServedGap: harness.Total(served),
		FirstRegistered: regA.At.Sub(a.Started), NextRegistered: regB.At.Sub(b.Started)}
}

func s3(n *harness.Node) Result {
	c := checker{n}
	grace := 20 * time.Second
	a, regA := c.startHolder("ds-a", harness.OntapOptions{HandoverGrace: grace})
	from := time.Now()
	c.Step("delete ds-a first (handover grace %v)", grace)
	a.Delete(harness.DefaultGracePeriod)
	time.Sleep(3 * time.Second)
	c.Step("start ds-b 3 s later")
	b := c.StartOntap("ds-b", harness.OntapOptions{HandoverGrace: grace})
	regB := c.waitSuccessor(b, harness.Generation(regA.Versions))
	if !a.Wait(exitTimeout) {
		c.T.Fatalf("ds-a did not exit")
	}
	c.Settle(settle)
	to := time.Now()

	gaps := c.noDeregGap(from, to)
	served := c.allServed(from, to)
	c.endsOn(b)
	c.noCrash(a, b)
	return Result{Gap: harness.Total(gaps), ServedGap: harness.Total(served),
		FirstRegistered: regA.At.Sub(a.Started), NextRegistered: regB.At.Sub(b.Started)}
}

func s4(n *harness.Node) Result {
	c := checker{n}
	grace := 2 * time.Second
	a, regA := c.startHolder("ds-a", harness.OntapOptions{HandoverGrace: grace})
	from := time.Now()
	c.Step("delete ds-a, no successor (handover grace %v)", grace)
	exited := c.deleteAndWait(a)
	c.Step("node without a node plugin for %v", *s4Wait)
	time.Sleep(*s4Wait)
	if !c.RegisteredNow() {
		c.T.Errorf("kubelet dropped the driver while no node plugin ran")
	}
	if c.ServedNow() {
		c.T.Errorf("kubelet calls are served although no node plugin runs")
	}
	c.Step("start ds-b")
	b := c.StartOntap("ds-b", harness.OntapOptions{HandoverGrace: grace})
	servedAt, ok := time.Time{}, false
	c.MustWait(registerTimeout, "kubelet calls to be served by ds-b", func() bool {
		servedAt, ok = c.TL.Series(harness.SigServed).FirstTrue(b.Started)
		return ok
	})
	regB := c.waitSuccessor(b, harness.Generation(regA.Versions))
	c.Step("ds-b served kubelet's calls %v after its start, its registration came %v after its start",
		servedAt.Sub(b.Started).Round(time.Millisecond), regB.At.Sub(b.Started).Round(time.Millisecond))
	c.Settle(settle)
	to := time.Now()
	gaps := c.noDeregGap(from, to)
	unserved := c.ServedGaps(exited, to)
	c.endsOn(b)
	c.noCrash(a, b)

	c.Step("--deregister-on-shutdown=always: delete ds-b, start ds-c with the flag, delete ds-c")
	c.deleteAndWait(b)
	cc, _ := c.startHolder("ds-c", harness.OntapOptions{HandoverGrace: grace, DeregisterAlways: true})
	deleted := time.Now()
	c.deleteAndWait(cc)
	c.MustWait(registerTimeout, "kubelet to deregister the driver", func() bool { return !c.RegisteredNow() })
	c.Settle(settle)
	if c.RegisteredNow() {
		c.T.Errorf("driver registered again after ds-c, started with --deregister-on-shutdown=always, was deleted")
	}
	if d := c.Deregistrations(deleted); len(d) != 1 {
		c.T.Errorf("kubelet called DeRegisterPlugin %d times after ds-c was deleted, want 1", len(d))
	}
	if r := c.Registrations(deleted); len(r) > 0 {
		c.T.Errorf("kubelet registered the driver again after ds-c was deleted: %v", r[0].Versions)
	}
	return Result{Gap: harness.Total(gaps), ServedGap: harness.Total(unserved),
		FirstRegistered: regA.At.Sub(a.Started), NextRegistered: regB.At.Sub(b.Started)}
}

func s5(n *harness.Node) Result {
	c := checker{n}
	a, regA := c.startHolder("ds-a", harness.OntapOptions{})
	from := time.Now()
	c.Step("start ds-b; ds-a becomes standby")
	b := c.StartOntap("ds-b", harness.OntapOptions{})
	regB := c.waitSuccessor(b, harness.Generation(regA.Versions))
	c.MustWait(registerTimeout, "the lease to name ds-b", func() bool { return c.Holder(b) })
	// The superseded process notices through inotify, or its 1 s poll.
	time.Sleep(1500 * time.Millisecond)
	c.Step("SIGKILL the holder ds-b")
	killed := time.Now()
	b.Kill()
	c.MustWait(registerTimeout, "kubelet calls to be served again", func() bool {
		return time.Since(killed) > 100*time.Millisecond && c.ServedNow()
	})
	regA2 := c.WaitNewRegistration(killed, harness.Generation(regB.Versions), registerTimeout)
	c.Step("standby ds-a registered generation %d %v after the kill", harness.Generation(regA2.Versions), regA2.At.Sub(killed).Round(time.Millisecond))
	c.Settle(settle)
	to := time.Now()

	gaps := c.noDeregGap(from, to)
	unserved := c.ServedGaps(from, to)
	var down time.Duration // from the kill to the first served call after it
	if g := c.ServedGaps(killed, to); len(g) > 0 {
		down = g[0].To.Sub(killed)
	}
	c.bound("S5 E served again after the holder's SIGKILL", down, 2*time.Second)
	c.endsOn(a)
	c.noCrash(a)
	return Result{Gap: harness.Total(gaps), ServedGap: harness.Total(unserved),
		FirstRegistered: regA.At.Sub(a.Started), NextRegistered: regB.At.Sub(b.Started)}
}

func s6(n *harness.Node) Result {
	c := checker{n}
	a, regA := c.startHolder("ds-a", harness.OntapOptions{})
	genA := harness.Generation(regA.Versions)
	var b *harness.Pod
	var genB uint64
	c.RestartKubelet(func() {
		c.Step("kubelet down: start ds-b, wait for its registration socket")
		b = c.StartOntap("ds-b", harness.OntapOptions{})
		c.MustWait(registerTimeout, "ds-b's registration socket next to ds-a's", func() bool {
			socks := c.generationSockets()
			genB = maxGen(socks)
			_, aThere := socks[genA]
			return genB > genA && aThere
		})
		c.Step("both sockets present: %v", c.generationSockets())
	})
	restarted := time.Now()
	reg := c.MustWait(registerTimeout, "kubelet to register ds-b's generation", func() bool {
		g, ok := c.RegisteredGeneration()
		return ok && g == genB
	})
	c.Step("after the restart kubelet registered generation %d in %v", genB, reg.Sub(restarted).Round(time.Millisecond))
	c.waitAvailable()
	from := time.Now()
	c.Step("delete ds-a")
	c.deleteAndWait(a)
	c.Settle(settle)
	to := time.Now()

	gaps := c.noDeregGap(from, to)
	c.allServed(from, to)
	c.endsOn(b)
	c.noCrash(a, b)
	return Result{Gap: harness.Total(gaps), FirstRegistered: regA.At.Sub(a.Started)}
}

func s7(n *harness.Node) Result {
	c := checker{n}
	a, regA := c.startHolder("ds-a", harness.OntapOptions{})
	pid := a.PID("ontap-csi")
	socks := c.generationSockets()
	name, ok := socks[harness.Generation(regA.Versions)]
	if !ok {
		c.T.Fatalf("no registration socket of generation %d in %s: %v", harness.Generation(regA.Versions), c.RegDir, harness.DirNames(c.RegDir))
	}
	c.Step("delete %s by hand", name)
	deleted := time.Now()
	if err := os.Remove(filepath.Join(c.RegDir, name)); err != nil {
		c.T.Fatal(err)
	}
	reg := c.WaitNewRegistration(deleted, harness.Generation(regA.Versions), registerTimeout)
	c.Settle(settle)
	to := time.Now()
	// Kubelet deregisters the driver when the socket goes (K4). The gap ends
	// when the CSI plugin and CSINode both have the driver again.
	gaps := c.DeregGaps(deleted, to)
	back := reg.At
	if len(gaps) > 0 {
		back = gaps[len(gaps)-1].To
	}
	c.Step("deregistration gaps after the deletion: %s", harness.FormatIntervals(gaps, c.TL.Start()))
	c.bound("S7 driver back in kubelet after the socket was deleted", back.Sub(deleted), 2*time.Second)

	if got := a.PID("ontap-csi"); got != pid {
		c.T.Errorf("ds-a's process changed from pid %d to %d: it restarted", pid, got)
	}
	if len(gaps) > 0 && gaps[len(gaps)-1].Open {
		c.T.Errorf("the driver is not back in kubelet")
	}
	c.endsOn(a)
	c.noCrash(a)
	return Result{Gap: harness.Total(gaps), FirstRegistered: regA.At.Sub(a.Started), NextRegistered: back.Sub(deleted)}
}

func s8(n *harness.Node) Result {
	c := checker{n}
	pod := func(name string) *harness.Pod {
		c.Step("start %s (ontap-csi + node-driver-registrar)", name)
		return c.StartPod(name, c.OntapContainer(harness.OntapOptions{}), c.RegistrarContainer())
	}
	a := pod("ds-a")
	regA := c.WaitNewRegistration(a.Started, 0, registerTimeout)
	c.waitAvailable()
	from := time.Now()

	c.Step("DaemonSet recreated, new pod first: start ds-b, delete ds-a 300 ms later")
	b := pod("ds-b")
	time.Sleep(300 * time.Millisecond)
	a.Delete(harness.DefaultGracePeriod)
	regB := c.waitSuccessor(b, harness.Generation(regA.Versions))
	if !a.Wait(exitTimeout) {
		c.T.Fatalf("ds-a did not exit")
	}
	c.Settle(settle)

	c.Step("DaemonSet recreated, old pod first: delete ds-b, start ds-c 3 s later")
	b.Delete(harness.DefaultGracePeriod)
	time.Sleep(3 * time.Second)
	cc := pod("ds-c")
	c.waitSuccessor(cc, harness.Generation(regB.Versions))
	if !b.Wait(exitTimeout) {
		c.T.Fatalf("ds-b did not exit")
	}
	c.Settle(settle)
	to := time.Now()

	gaps := c.DeregGaps(from, to)
	if len(gaps) > 0 && gaps[len(gaps)-1].Open {
		c.T.Errorf("kubelet was left without the driver: %s", harness.FormatIntervals(gaps, c.TL.Start()))
	}
	var longest time.Duration
	for _, g := range gaps {
		longest = max(longest, g.Duration())
	}
	if len(gaps) > 0 {
		c.Step("deregistration gaps: %s", harness.FormatIntervals(gaps, c.TL.Start()))
	}
	c.bound("S8 longest deregistration gap (aim 0)", longest, 2*time.Second)
	c.endsOn(cc)
	c.noCrash(a, b, cc)
	return Result{Gap: harness.Total(gaps), ServedGap: harness.Total(c.ServedGaps(from, to)),
		FirstRegistered: regA.At.Sub(a.Started), NextRegistered: regB.At.Sub(b.Started)}
}

// s8o is S8 as trident-operator recreates its DaemonSet when our image is
// swapped into it: the operator's template keeps the node-driver-registrar
// sidecar, and it deletes the old DaemonSet before it creates the new one
// (so the old pod gets SIGTERM first), or, since 21.01, waits until the old
// pods are gone. The registrar sidecars must cost no deregistration: ours
// outrank its 1.0.0 (K3, K8) and the holder retires its socket before
// kubelet registers it, so neither its unlink on SIGTERM nor the next
// registrar's socket at the same path makes kubelet deregister (K4).
func s8o(n *harness.Node) Result {
	c := checker{n}
	pod := func(name string) *harness.Pod {
		c.Step("start %s (ontap-csi + node-driver-registrar)", name)
		return c.StartPod(name, c.OntapContainer(harness.OntapOptions{}), c.RegistrarContainer())
	}
	a := pod("ds-a")
	regA := c.WaitNewRegistration(a.Started, 0, registerTimeout)
	c.waitAvailable()
	from := time.Now()

	c.Step("operator recreates the DaemonSet: delete ds-a, start ds-b 500 ms later, ds-a still terminating")
	a.Delete(harness.DefaultGracePeriod)
	time.Sleep(500 * time.Millisecond)
	b := pod("ds-b")
	regB := c.waitSuccessor(b, harness.Generation(regA.Versions))
	if !a.Wait(exitTimeout) {
		c.T.Fatalf("ds-a did not exit")
	}
	c.Settle(settle)
	mid := time.Now()
	// ds-a serves E until ds-b takes it over (I3): no call goes unserved.
	served := c.allServed(from, mid)

	c.Step("operator (21.01+) recreates the DaemonSet and waits: delete ds-b, start ds-c once it is gone")
	c.deleteAndWait(b)
	cc := pod("ds-c")
	c.waitSuccessor(cc, harness.Generation(regB.Versions))
	c.Settle(settle)
	to := time.Now()

	// Between ds-b's exit and ds-c's start no process serves E; kubelet
	// keeps the driver registered there and retries (S4), so only the
	// registration is judged: as S8, never left unregistered and no gap
	// over 2 s (aim 0), here failed on without -strict.
	gaps := c.DeregGaps(from, to)
	if len(gaps) > 0 {
		c.Step("deregistration gaps: %s", harness.FormatIntervals(gaps, c.TL.Start()))
	}
	for _, g := range gaps {
		if g.Open || g.Duration() > 2*time.Second {
			c.T.Errorf("kubelet lost the driver: %s", harness.FormatIntervals(gaps, c.TL.Start()))
			break
		}
	}
	c.endsOn(cc)
	c.noCrash(a, b, cc)
	return Result{Gap: harness.Total(gaps), ServedGap: harness.Total(served),
		FirstRegistered: regA.At.Sub(a.Started), NextRegistered: regB.At.Sub(b.Started)}
}

func s9(n *harness.Node) Result {
	c := checker{n}
	res := legacyRecreate(c, 300*time.Millisecond, false, true)
	if !res.GapOpen {
		c.T.Errorf("the legacy registrar kept the driver registered: the harness did not reproduce the seed bug")
	}
	if c.RegisteredNow() {
		c.T.Errorf("driver registered at the end")
	}
	return res
}

// legacyRecreate runs Trident 20.10's DaemonSet through a recreate: new pod
// first with the old one deleted after delay, or (oldFirst) the old pod
// deleted and the new one started after delay. With seed, the old pod is
// deleted only once the new pod's registrar has re-created the registration
// socket, the order of the seed incident (docs/design/registration.md §1), whatever the
// machine's speed.
func legacyRecreate(c checker, delay time.Duration, oldFirst, seed bool) Result {
	c.Step("start ds-a (trident-main + node-driver-registrar)")
	a := c.StartLegacy("ds-a")
	regA := c.WaitRegistered(a.Started, registerTimeout)
	c.Step("kubelet registered ds-a %v after start", regA.At.Sub(a.Started).Round(time.Millisecond))
	c.waitAvailable()
	from := time.Now()
	var b *harness.Pod
	if oldFirst {
		c.Step("delete ds-a, start ds-b %v later", delay)
		a.Delete(harness.DefaultGracePeriod)
		time.Sleep(delay)
		b = c.StartLegacy("ds-b")
	} else {
		c.Step("start ds-b, delete ds-a %v later", delay)
		ino := harness.Inode(c.LegacyRegSock())
		b = c.StartLegacy("ds-b")
		time.Sleep(delay)
		if seed {
			c.MustWait(registerTimeout, "ds-b's registrar to re-create its socket", func() bool {
				i := harness.Inode(c.LegacyRegSock())
				return i != 0 && i != ino
			})
			c.Step("ds-b's registrar replaced the registration socket; delete ds-a")
		}
		a.Delete(harness.DefaultGracePeriod)
	}
	if !a.Wait(exitTimeout) {
		c.T.Fatalf("ds-a did not exit")
	}
	c.Settle(10 * time.Second)
	to := time.Now()
	gaps := c.DeregGaps(from, to)
	res := Result{Gap: harness.Total(gaps), ServedGap: harness.Total(c.ServedGaps(from, to)), FirstRegistered: regA.At.Sub(a.Started)}
	res.GapOpen = len(gaps) > 0 && gaps[len(gaps)-1].Open
	if regs := c.Registrations(b.Started); len(regs) > 0 {
		res.NextRegistered = regs[0].At.Sub(b.Started)
	}
	c.Step("deregistration gaps: %s", harness.FormatIntervals(gaps, c.TL.Start()))
	return res
}

func s10(n *harness.Node) Result {
	c := checker{n}
	from := time.Now()
	c.Step("start ds-a, ds-b, ds-c at once")
	pods := []*harness.Pod{
		c.StartOntap("ds-a", harness.OntapOptions{}),
		c.StartOntap("ds-b", harness.OntapOptions{}),
		c.StartOntap("ds-c", harness.OntapOptions{}),
	}
	reg := c.WaitNewRegistration(from, 0, registerTimeout)
	c.waitAvailable()
	available := time.Now()
	c.Settle(5 * time.Second)
	to := time.Now()

	var holder *harness.Pod
	for _, p := range pods {
		if c.Holder(p) {
			holder = p
		}
		if !p.Running("ontap-csi") {
			c.T.Errorf("%s is not running: the two that lost must stay as standby", p.Name)
		}
	}
	l := c.Obs.Lease()
	if holder == nil {
		c.T.Fatalf("the lease names none of the three pods: %s", l)
	}
	for _, seen := range c.Obs.Leases() {
		if seen.Generation > l.Generation {
			c.T.Errorf("the holder's generation %d is not the newest; the lease had %d", l.Generation, seen.Generation)
		}
	}
	// One registration is left: the holder's socket is the only one in
	// plugins_registry and is what kubelet has. Processes "at once" still
	// reach the lease a few hundred ms apart on a loaded node, so kubelet may
	// have registered an earlier holder on the way; that is reported, and it
	// must not have cost a deregistration.
	socks := c.generationSockets()
	if len(socks) != 1 || socks[l.Generation] == "" {
		c.T.Errorf("plugins_registry holds generation sockets %v, want only the holder's generation %d", socks, l.Generation)
	}
	var vs [][]string
	for _, r := range c.Registrations(from) {
		vs = append(vs, r.Versions)
	}
	c.Step("kubelet registrations on the way: %d %v", len(vs), vs)
	c.endsOn(holder)
	gaps := c.noDeregGap(available, to)
	c.allServed(available, to)
	c.noCrash(pods...)
	c.Step("holder %s, generation %d", holder.Name, l.Generation)
	return Result{Gap: harness.Total(gaps), FirstRegistered: reg.At.Sub(from)}
}

func s11(n *harness.Node) Result {
	c := checker{n}
	prev, reg := c.startHolder("ds-0", harness.OntapOptions{})
	from := time.Now()
	var old []*harness.Pod // deleted, possibly still terminating
	var worst time.Duration
	for i := 1; i <= *s11Updates; i++ {
		start := time.Now()
		next := c.StartOntap("ds-"+strconv.Itoa(i), harness.OntapOptions{})
		reg = c.WaitNewRegistration(next.Started, harness.Generation(reg.Versions), registerTimeout)
		// The DaemonSet controller deletes the old pod once the new one is
		// available and moves on; it does not wait for the old one to exit.
		prev.Delete(harness.DefaultGracePeriod)
		old = append(old, prev)
		if g := c.DeregGaps(start, time.Now()); len(g) > 0 {
			c.T.Errorf("update %d: kubelet lost the driver: %s", i, harness.FormatIntervals(g, c.TL.Start()))
		}
		worst = max(worst, reg.At.Sub(next.Started))
		prev = next
		if i%10 == 0 {
			c.Step("%d updates done", i)
		}
	}
	c.waitAll(old)
	c.Settle(settle)
	to := time.Now()

	gaps := c.noDeregGap(from, to)
	served := c.allServed(from, to)
	c.endsOn(prev)
	c.noCrash(append(old, prev)...)
	regs := harness.DirNames(c.RegDir)
	c.Step("at the end: plugins_registry %v, plugin dir %v", regs, harness.DirNames(c.PluginDir))
	if len(regs) != 1 {
		c.T.Errorf("plugins_registry holds %d entries after the updates, want only the holder's socket: %v", len(regs), regs)
	}
	// Dead generations' .alive files go with the holder's garbage
	// collection, which also runs periodically: wait for one round.
	want := "g" + strconv.FormatUint(c.Obs.Lease().Generation, 10) + ".alive"
	collected := c.WaitFor(gcTimeout, func() bool {
		alive := aliveFiles(c.PluginDir)
		return len(alive) == 1 && alive[0] == want
	})
	plug := harness.DirNames(c.PluginDir)
	if !collected {
		c.T.Errorf("after %v the plugin dir still holds .alive files of dead generations: %v", gcTimeout, plug)
	}
	if d := dotFiles(c.PluginDir); len(d) > 0 {
		c.T.Errorf("leftover temporary files in the plugin dir: %v", d)
	}
	c.Step("plugin dir after garbage collection (%v after the end): %v", time.Since(to).Round(time.Second), plug)
	c.Step("slowest registration of a successor: %v", worst.Round(time.Millisecond))
	return Result{Gap: harness.Total(gaps), ServedGap: harness.Total(served), NextRegistered: worst}
}

func s12(n *harness.Node) Result {
	c := checker{n}
	a, regA := c.startHolder("ds-a", harness.OntapOptions{})
	c.Step("ontap-csi deregister")
	ran := time.Now()
	cmd := exec.Command(c.OntapCSI(), "deregister", "--kubelet-dir="+c.Root, "--registration-dir="+c.RegDir)
	out, err := cmd.CombinedOutput()
	c.T.Logf("ontap-csi deregister: %s", out)
	if err != nil {
		c.T.Fatalf("ontap-csi deregister: %v", err)
	}
	c.MustWait(registerTimeout, "kubelet to deregister the driver", func() bool { return !c.RegisteredNow() })
	c.Step("kubelet deregistered the driver; delete ds-a")
	c.deleteAndWait(a)
	c.Settle(5 * time.Second)

	if d := c.Deregistrations(ran); len(d) != 1 {
		c.T.Errorf("kubelet called DeRegisterPlugin %d times, want once", len(d))
	}
	if r := c.Registrations(ran); len(r) > 0 {
		c.T.Errorf("the driver was registered again after deregister: %v at %+.3fs", r[0].Versions, r[0].At.Sub(c.TL.Start()).Seconds())
	}
	if c.RegisteredNow() {
		c.T.Errorf("driver registered at the end")
	}
	c.noCrash(a)
	return Result{FirstRegistered: regA.At.Sub(a.Started)}
}

func l1(n *harness.Node) Result {
	c := checker{n}
	c.Step("start ds-a (trident-main + node-driver-registrar)")
	a := c.StartLegacy("ds-a")
	regA := c.WaitRegistered(a.Started, registerTimeout)
	c.waitAvailable()
	from := time.Now()
	c.Step("surge: start ds-b next to ds-a")
	b := c.StartLegacy("ds-b")
	res := Result{FirstRegistered: regA.At.Sub(a.Started)}
	if c.WaitFor(registerTimeout, func() bool { return len(c.Registrations(b.Started)) > 0 }) {
		res.NextRegistered = c.Registrations(b.Started)[0].At.Sub(b.Started)
	}
	c.Step("rolling update: delete ds-a")
	c.deleteAndWait(a)
	c.Settle(10 * time.Second)
	gaps := c.DeregGaps(from, time.Now())
	res.Gap, res.ServedGap = harness.Total(gaps), harness.Total(c.ServedGaps(from, time.Now()))
	res.GapOpen = len(gaps) > 0 && gaps[len(gaps)-1].Open
	c.Step("deregistration gaps: %s", harness.FormatIntervals(gaps, c.TL.Start()))
	return res
}

func l2(n *harness.Node) Result {
	return legacyRecreate(checker{n}, 300*time.Millisecond, false, false)
}
func l3(n *harness.Node) Result { return legacyRecreate(checker{n}, 3*time.Second, true, false) }

// M1 is the migration of docs/design/registration.md §7.7 followed by a registrar sidecar
// that starts again. Kubelet registered the legacy socket (Trident's
// DaemonSet); our pod starts next to it, registers, and retires the legacy
// socket by rename, which leaves that path in kubelet's actual state (K1).
// After the legacy pod is gone, a node-driver-registrar (a sidecar left in an
// operator-generated DaemonSet, restarted by its liveness probe) creates the
// legacy socket again. If kubelet's watcher sees that Create before the
// holder retires the socket, kubelet unregisters the stale path and with it
// the driver, by name (docs/design/registration.md §7.5d); the holder's re-registration must
// bring it back. Like S8: never left unregistered, gap ≤ 2 s (aim 0).
var M1 = Scenario{"M1", "migration from the legacy DaemonSet, then a registrar sidecar (re)starts", m1}

func m1(n *harness.Node) Result {
	c := checker{n}
	c.Step("start legacy (trident-main + node-driver-registrar): kubelet registers the legacy socket")
	legacy := c.StartLegacy("trident-legacy")
	c.WaitRegistered(legacy.Started, registerTimeout)
	c.waitAvailable()
	c.Step("start ds-a (ontap-csi) next to it")
	a := c.StartOntap("ds-a", harness.OntapOptions{})
	regA := c.waitSuccessor(a, 0)
	c.MustWait(registerTimeout, "the legacy socket to be retired", func() bool { return harness.Inode(c.LegacyRegSock()) == 0 })
	c.Step("delete the legacy pod")
	c.deleteAndWait(legacy)
	c.Settle(settle)
	from := time.Now()
	c.Step("a node-driver-registrar sidecar starts and creates the legacy socket again")
	c.StartPod("sidecar", c.RegistrarContainer())
	c.Settle(10 * time.Second)
	to := time.Now()

	gaps := c.DeregGaps(from, to)
	c.Step("deregistration gaps: %s; DeRegisterPlugin calls: %d", harness.FormatIntervals(gaps, c.TL.Start()), len(c.Deregistrations(from)))
	if len(gaps) > 0 && gaps[len(gaps)-1].Open {
		c.T.Errorf("kubelet was left without the driver")
	}
	var longest time.Duration
	for _, g := range gaps {
		longest = max(longest, g.Duration())
	}
	c.bound("M1 longest deregistration gap (aim 0)", longest, 2*time.Second)
	c.endsOn(a)
	c.noCrash(a)
	return Result{Gap: harness.Total(gaps), FirstRegistered: regA.At.Sub(a.Started)}
}
