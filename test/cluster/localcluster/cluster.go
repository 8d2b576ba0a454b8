// Package localcluster brings up a real single-node Kubernetes cluster on
// this machine for end-to-end tests, and tears it down without a trace.
//
// It follows docs/design/local-cluster.md: Debian's containerd 1.6,
// runc, etcd 3.4 and CNI plugins; kube-apiserver, kube-controller-manager,
// kube-scheduler and kubelet built from k8s.io/kubernetes (BuildKube); a
// generated PKI; a bridge CNI network; images imported from tarballs. All of
// it runs inside a mount and a network namespace owned by cmd/nodens, so no
// packet leaves the machine and nothing is written to the host outside the
// test root: the host's /var/lib/kubelet, /var/lib/cni, /var/log/pods, ...
// are overlays inside that namespace.
package localcluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// The cluster's fixed addresses, all inside the node's network namespace.
const (
	NodeName    = "e2e-node"
	NodeIP      = "10.250.0.10"
	nodeCIDR    = NodeIP + "/24"
	ServiceCIDR = "10.251.0.0/24"
	// serviceIP is the "kubernetes" Service's ClusterIP; nodens forwards it
	// to the API server in place of kube-proxy.
	serviceIP     = "10.251.0.1"
	clusterDNSIP  = "10.251.0.10"
	PodCIDR       = "10.252.0.0/24"
	apiServerPort = 6443
	PauseImage    = "localhost/pause:e2e"
)

// kubeletSysctls are the global sysctls the kubelet sets at start
// (docs/design/local-cluster.md §6: overcommit, panic, panic_on_oops; the rest of its
// list for good measure); nodens restores them.
var kubeletSysctls = []string{
	"vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
	"kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes",
}

// nodeOverlays are the host directories the cluster writes to; inside the
// node's namespace each is an overlay whose upper layer is in the test root.
var nodeOverlays = []string{"/var/lib", "/var/log", "/opt", "/usr/libexec", "/usr/sbin", "/etc"}

// hostWitnesses are paths a cluster on the real host would create; Teardown
// checks that none appeared.
var hostWitnesses = []string{
	"/var/lib/kubelet", "/var/lib/cni", "/var/lib/trident", "/var/log/pods", "/var/log/containers",
	"/opt/containerd", "/usr/libexec/kubernetes", "/run/containerd", "/etc/cni", "/usr/sbin/mount.nfs",
}

// Config says what to run.
type Config struct {
	Kube KubeBinaries
	// NodeNS is the built cmd/nodens.
	NodeNS string
	// Archives are docker-archive images to import; one must be PauseImage.
	Archives []string
	// NodeFiles maps a path on the node to a file here. The path must lie in
	// one of the overlaid directories (/var/lib, /var/log, /opt,
	// /usr/libexec, /usr/sbin, /etc); the host never sees it.
	NodeFiles map[string]string
	// Forwards maps a socket name to a TCP address inside the node's
	// network namespace: the test dials the unix socket ForwardSocket(name)
	// to reach a server there (the API server has one already).
	Forwards map[string]string
	// KubeletVerbosity is the kubelet's -v (default 2).
	KubeletVerbosity int
	Logf             func(format string, args ...any)
}

// Cluster is a running single-node cluster.
type Cluster struct {
	Root             string
	LogDir           string
	ContainerdSocket string
	AdminKubeconfig  string
	RESTConfig       *rest.Config
	Client           kubernetes.Interface
	// Kubelet is the kubelet daemon; its log is the record of kubelet's
	// volume operations.
	Kubelet *Process

	cfg         Config
	cgroupName  string
	pki         *pki
	nodeNS      *nodeNS
	procs       []*Process // start order; stopped in reverse
	apiSock     string
	witnessedAt map[string]bool
	logf        func(string, ...any)
}

// Start brings the cluster up to a Ready node with a default ServiceAccount.
// On error everything started so far is torn down again.
func Start(ctx context.Context, cfg Config) (c *Cluster, err error) {
	logf := cfg.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	// Short: unix socket paths under it must stay below 108 bytes.
	root, err := os.MkdirTemp("", "occ-")
	if err != nil {
		return nil, err
	}
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	c = &Cluster{
		Root:             root,
		LogDir:           filepath.Join(root, "logs"),
		ContainerdSocket: filepath.Join(root, "containerd", "containerd.sock"),
		apiSock:          filepath.Join(root, "apiserver.sock"),
		cfg:              cfg,
		cgroupName:       "ontap-csi-e2e-" + hex.EncodeToString(suffix),
		witnessedAt:      map[string]bool{},
		logf:             logf,
	}
	for _, p := range hostWitnesses {
		c.witnessedAt[p] = fileExists(p)
	}
	defer func() {
		if err != nil {
			if _, terr := c.Teardown(); terr != nil {
				logf("teardown after failed start: %v", terr)
			}
			c = nil
		}
	}()
	start := time.Now()
	step := func(what string) { logf("cluster: %s (%.1fs)", what, time.Since(start).Seconds()) }

	if err := os.MkdirAll(c.LogDir, 0o755); err != nil {
		return c, err
	}
	if err := c.startNode(); err != nil {
		return c, err
	}
	step("node namespaces ready")
	if err := c.writePKI(); err != nil {
		return c, err
	}
	if err := c.writeCNIConfig(); err != nil {
		return c, err
	}
	step("PKI written")
	if err := c.startContainerd(ctx); err != nil {
		return c, err
	}
	for _, a := range cfg.Archives {
		if err := c.ImportImage(ctx, a); err != nil {
			return c, err
		}
	}
	step("containerd up, images imported")
	if err := c.startControlPlane(ctx); err != nil {
		return c, err
	}
	step("API server ready")
	if err := c.startKubelet(); err != nil {
		return c, err
	}
	if err := c.waitNodeReady(ctx, 2*time.Minute); err != nil {
		return c, err
	}
	step("node Ready")
	if err := poll(ctx, 2*time.Minute, func() (bool, error) {
		_, err := c.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		return c, fmt.Errorf("default ServiceAccount: %w", err)
	}
	step("default ServiceAccount exists")
	return c, nil
}

func (c *Cluster) startNode() error {
	// Files the node must have (the NFS shim as mount.nfs) go into the
	// upper layer of their overlay before it is mounted.
	for dst, src := range c.cfg.NodeFiles {
		upper, rel, ok := overlayUpper(c.Root, dst)
		if !ok {
			return fmt.Errorf("node file %s is not under an overlaid directory %v", dst, nodeOverlays)
		}
		if err := CopyFile(src, filepath.Join(upper, rel)); err != nil {
			return err
		}
	}
	kubeletDir := filepath.Join(c.Root, "kubelet")
	if err := os.MkdirAll(kubeletDir, 0o755); err != nil {
		return err
	}
	args := []string{
		"-root", c.Root, "-tmpfs", "/run",
		"-bind", kubeletDir + ":/var/lib/kubelet",
		"-node-cidr", nodeCIDR,
		"-service-ip", serviceIP, "-apiserver", net.JoinHostPort(NodeIP, strconv.Itoa(apiServerPort)),
		"-cgroup", c.cgroupName,
		"-forward", c.apiSock + ":" + net.JoinHostPort(NodeIP, strconv.Itoa(apiServerPort)),
	}
	for name, addr := range c.cfg.Forwards {
		args = append(args, "-forward", c.ForwardSocket(name)+":"+addr)
	}
	for _, o := range nodeOverlays {
		args = append(args, "-overlay", o)
	}
	for _, s := range kubeletSysctls {
		args = append(args, "-sysctl", s)
	}
	ns, err := startNodeNS(c.cfg.NodeNS, filepath.Join(c.LogDir, "nodens.log"), args)
	if err != nil {
		return err
	}
	c.nodeNS = ns
	return nil
}

// ForwardSocket is the unix socket that reaches Config.Forwards[name].
func (c *Cluster) ForwardSocket(name string) string {
	return filepath.Join(c.Root, "fwd-"+name+".sock")
}

// overlayUpper maps a node path to its overlay's upper directory.
func overlayUpper(root, nodePath string) (upper, rel string, ok bool) {
	for _, o := range nodeOverlays {
		if r, err := filepath.Rel(o, nodePath); err == nil && !strings.HasPrefix(r, "..") && r != "." {
			name := strings.ReplaceAll(strings.Trim(o, "/"), "/", "_")
			return filepath.Join(root, "nodens", "overlay", name, "upper"), r, true
		}
	}
	return "", "", false
}

func (c *Cluster) writePKI() error {
	p, err := newPKI(filepath.Join(c.Root, "pki"))
	if err != nil {
		return err
	}
	c.pki = p
	node := net.ParseIP(NodeIP)
	specs := []certSpec{
		{name: "apiserver", cn: "kube-apiserver", server: true,
			ips: []net.IP{net.ParseIP("127.0.0.1"), node, net.ParseIP(serviceIP)},
			dns: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}},
		{name: "admin", cn: "e2e-admin", orgs: []string{"system:masters"}, client: true},
		{name: "apiserver-kubelet-client", cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}, client: true},
		{name: "controller-manager", cn: "system:kube-controller-manager", client: true},
		{name: "scheduler", cn: "system:kube-scheduler", client: true},
		{name: "kubelet", cn: "system:node:" + NodeName, orgs: []string{"system:nodes"}, client: true},
		{name: "kubelet-serving", cn: NodeName, server: true, ips: []net.IP{node}, dns: []string{NodeName}},
	}
	for _, s := range specs {
		if err := p.issue(s); err != nil {
			return err
		}
	}
	if err := p.serviceAccountKeys(); err != nil {
		return err
	}
	server := "https://" + net.JoinHostPort(NodeIP, strconv.Itoa(apiServerPort))
	for _, user := range []string{"admin", "controller-manager", "scheduler", "kubelet"} {
		path, err := p.kubeconfig(user, server)
		if err != nil {
			return err
		}
		if user == "admin" {
			c.AdminKubeconfig = path
		}
	}
	rc, err := clientcmd.BuildConfigFromFlags("", c.AdminKubeconfig)
	if err != nil {
		return err
	}
	// The test runs outside the node's network namespace; nodens forwards
	// this unix socket to the API server inside it.
	rc.Dial = func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", c.apiSock)
	}
	rc.QPS, rc.Burst = 100, 200
	c.RESTConfig = rc
	c.Client, err = kubernetes.NewForConfig(rc)
	return err
}

func (c *Cluster) startContainerd(ctx context.Context) error {
	conf, err := c.writeContainerdConfig()
	if err != nil {
		return err
	}
	p, err := c.startProcess("containerd", []string{"containerd", "--config", conf}, nil)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, p)
	return poll(ctx, time.Minute, func() (bool, error) {
		if exited, err := p.Exited(); exited {
			return false, fmt.Errorf("containerd exited: %v (see %s)", err, p.Log)
		}
		_, err := c.Ctr(ctx, "version")
		return err == nil, nil
	})
}

// Ctr runs ctr against the cluster's containerd, in the k8s.io namespace
// (the one CRI uses), inside the node's namespaces.
func (c *Cluster) Ctr(ctx context.Context, args ...string) ([]byte, error) {
	return c.Exec(ctx, append([]string{"ctr", "--address", c.ContainerdSocket, "--namespace", "k8s.io"}, args...)...)
}

// Exec runs a command inside the node's mount and network namespaces.
func (c *Cluster) Exec(ctx context.Context, argv ...string) ([]byte, error) {
	args := append([]string{"--target", strconv.Itoa(c.nodeNS.pid), "--mount", "--net", "--"}, argv...)
	cmd := exec.CommandContext(ctx, "nsenter", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// ImportImage imports a docker-archive tarball for the kubelet to use.
func (c *Cluster) ImportImage(ctx context.Context, archive string) error {
	_, err := c.Ctr(ctx, "images", "import", archive)
	return err
}

// NodePath is where the test reads a path as the node sees it (through
// nodens' root, in the node's mount namespace).
func (c *Cluster) NodePath(p string) string {
	return filepath.Join(fmt.Sprintf("/proc/%d/root", c.nodeNS.pid), p)
}

// StartProcess runs a daemon inside the node's namespaces (the ONTAP
// simulator, the controller); it is stopped at teardown.
func (c *Cluster) StartProcess(name string, argv, env []string) (*Process, error) {
	p, err := c.startProcess(name, argv, env)
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, p)
	return p, nil
}

func (c *Cluster) startControlPlane(ctx context.Context) error {
	k, p := c.cfg.Kube, c.pki
	etcdDir := filepath.Join(c.Root, "etcd")
	daemons := []struct {
		name string
		argv []string
	}{
		{"etcd", []string{"etcd", "--name", "e2e", "--data-dir", etcdDir,
			"--listen-client-urls", "http://127.0.0.1:2379", "--advertise-client-urls", "http://127.0.0.1:2379",
			"--listen-peer-urls", "http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
			"--initial-cluster", "e2e=http://127.0.0.1:2380"}},
		{"kube-apiserver", []string{k.Path("kube-apiserver"),
			"--etcd-servers=http://127.0.0.1:2379",
			"--bind-address=0.0.0.0", "--secure-port=" + strconv.Itoa(apiServerPort), "--advertise-address=" + NodeIP,
			"--service-cluster-ip-range=" + ServiceCIDR,
			// A CSI node plugin is privileged.
			"--allow-privileged=true",
			"--client-ca-file=" + p.CAFile(),
			"--tls-cert-file=" + p.path("apiserver.crt"), "--tls-private-key-file=" + p.path("apiserver.key"),
			"--kubelet-client-certificate=" + p.path("apiserver-kubelet-client.crt"),
			"--kubelet-client-key=" + p.path("apiserver-kubelet-client.key"),
			// The default tries the host name first, which would be looked up
			// in the host's resolver.
			"--kubelet-preferred-address-types=InternalIP",
			"--service-account-key-file=" + p.path("sa.pub"),
			"--service-account-signing-key-file=" + p.path("sa.key"),
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
			"--profiling=false"}},
	}
	for _, d := range daemons {
		proc, err := c.startProcess(d.name, d.argv, nil)
		if err != nil {
			return err
		}
		c.procs = append(c.procs, proc)
	}
	if err := poll(ctx, 3*time.Minute, func() (bool, error) {
		for _, proc := range c.procs {
			if exited, err := proc.Exited(); exited {
				return false, fmt.Errorf("%s exited: %v (see %s)", proc.Name, err, proc.Log)
			}
		}
		body, err := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", nil
	}); err != nil {
		return fmt.Errorf("API server /readyz: %w", err)
	}
	kubeconfig := func(user string) string { return p.path(user + ".kubeconfig") }
	rest := []struct {
		name string
		argv []string
	}{
		{"kube-controller-manager", []string{k.Path("kube-controller-manager"),
			"--kubeconfig=" + kubeconfig("controller-manager"),
			"--authentication-kubeconfig=" + kubeconfig("controller-manager"),
			"--authorization-kubeconfig=" + kubeconfig("controller-manager"),
			"--service-account-private-key-file=" + p.path("sa.key"), "--root-ca-file=" + p.CAFile(),
			"--use-service-account-credentials=true", "--leader-elect=false", "--bind-address=127.0.0.1",
			"--profiling=false"}},
		{"kube-scheduler", []string{k.Path("kube-scheduler"),
			"--kubeconfig=" + kubeconfig("scheduler"),
			"--authentication-kubeconfig=" + kubeconfig("scheduler"),
			"--authorization-kubeconfig=" + kubeconfig("scheduler"),
			"--leader-elect=false", "--bind-address=127.0.0.1", "--profiling=false"}},
	}
	for _, d := range rest {
		proc, err := c.startProcess(d.name, d.argv, nil)
		if err != nil {
			return err
		}
		c.procs = append(c.procs, proc)
	}
	return nil
}

func (c *Cluster) kubeletArgv() ([]string, error) {
	conf, err := c.writeKubeletConfig()
	if err != nil {
		return nil, err
	}
	v := c.cfg.KubeletVerbosity
	if v == 0 {
		v = 2
	}
	return []string{c.cfg.Kube.Path("kubelet"),
		"--config=" + conf,
		"--kubeconfig=" + c.pki.path("kubelet.kubeconfig"),
		"--hostname-override=" + NodeName,
		"--node-ip=" + NodeIP,
		"--v=" + strconv.Itoa(v),
	}, nil
}

func (c *Cluster) startKubelet() error {
	argv, err := c.kubeletArgv()
	if err != nil {
		return err
	}
	p, err := c.startProcess("kubelet", argv, nil)
	if err != nil {
		return err
	}
	c.Kubelet = p
	c.procs = append(c.procs, p)
	return nil
}

// RestartKubelet stops the kubelet (SIGTERM, as a service manager would)
// and starts it again with the same configuration.
func (c *Cluster) RestartKubelet() error {
	c.Kubelet.Stop(syscall.SIGTERM, 30*time.Second)
	return c.Kubelet.start(c.nodeNS.pid)
}

func (c *Cluster) waitNodeReady(ctx context.Context, timeout time.Duration) error {
	var last string
	err := poll(ctx, timeout, func() (bool, error) {
		if exited, err := c.Kubelet.Exited(); exited {
			return false, fmt.Errorf("kubelet exited: %v (see %s)", err, c.Kubelet.Log)
		}
		n, err := c.Client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				last = fmt.Sprintf("%s: %s", cond.Reason, cond.Message)
				return cond.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("node %s not Ready (%s): %w", NodeName, last, err)
	}
	return nil
}

// poll calls f every 200 ms until it returns true or an error, or timeout.
func poll(ctx context.Context, timeout time.Duration, f func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		ok, err := f()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// TeardownReport says what Teardown found and undid.
type TeardownReport struct {
	NodeNS   NodeNSReport
	Duration time.Duration
}

// Teardown stops everything, in order, and then checks that the host is as
// it was: no process left in the node's namespaces, no cgroup directory,
// no mount under the root, the kubelet's sysctls restored, none of the
// host paths a cluster writes created. Any difference is an error. The
// root directory is removed last.
func (c *Cluster) Teardown() (TeardownReport, error) {
	start := time.Now()
	var rep TeardownReport
	var errs []error
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	byName := map[string]*Process{}
	for _, p := range c.procs {
		byName[p.Name] = p
	}
	stop := func(name string, sig syscall.Signal, grace time.Duration) {
		if p := byName[name]; p != nil {
			p.Stop(sig, grace)
		}
	}
	// The kubelet first, so it does not restart what is stopped next.
	stop("kubelet", syscall.SIGTERM, 10*time.Second)
	if c.nodeNS != nil && byName["containerd"] != nil {
		if out, err := c.Ctr(ctx, "tasks", "ls", "-q"); err == nil {
			for _, id := range strings.Fields(string(out)) {
				_, _ = c.Ctr(ctx, "tasks", "kill", "--signal", "SIGKILL", id)
			}
		}
	}
	// Whatever else the test started (simulator, controller), newest first.
	for i := len(c.procs) - 1; i >= 0; i-- {
		switch p := c.procs[i]; p.Name {
		case "kubelet", "containerd", "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler":
		default:
			p.Stop(syscall.SIGTERM, 10*time.Second)
		}
	}
	stop("kube-scheduler", syscall.SIGTERM, 5*time.Second)
	stop("kube-controller-manager", syscall.SIGTERM, 5*time.Second)
	// A SIGTERM'd API server drains for over a minute (docs/design/local-cluster.md §3.5).
	stop("kube-apiserver", syscall.SIGTERM, 3*time.Second)
	stop("etcd", syscall.SIGTERM, 10*time.Second)
	stop("containerd", syscall.SIGTERM, 10*time.Second)

	var saved map[string]string
	var nsInodes []string
	if c.nodeNS != nil {
		saved = c.nodeNS.sysctls
		for _, ns := range []string{"mnt", "net"} {
			if id, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", c.nodeNS.pid, ns)); err == nil {
				nsInodes = append(nsInodes, id)
			}
		}
		nr, err := c.nodeNS.teardown(90 * time.Second)
		rep.NodeNS = nr
		if err != nil {
			errs = append(errs, err)
		}
		for _, e := range nr.Errors {
			errs = append(errs, errors.New("nodens: "+e))
		}
	}
	errs = append(errs, c.verifyHostClean(nsInodes, saved)...)
	if len(errs) == 0 {
		if err := os.RemoveAll(c.Root); err != nil {
			errs = append(errs, err)
		}
	} else {
		c.logf("teardown: keeping %s for inspection", c.Root)
	}
	rep.Duration = time.Since(start)
	return rep, errors.Join(errs...)
}

func (c *Cluster) verifyHostClean(nsInodes []string, saved map[string]string) []error {
	var errs []error
	// Processes still in the node's namespaces.
	if len(nsInodes) > 0 {
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			for _, ns := range []string{"mnt", "net"} {
				id, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, ns))
				if err == nil && contains(nsInodes, id) {
					comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
					errs = append(errs, fmt.Errorf("process %d (%s) is still in the node's %s namespace", pid, strings.TrimSpace(string(comm)), ns))
					break
				}
			}
		}
	}
	// Mounts on the host under the root (there should never have been any).
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) > 4 && (f[4] == c.Root || strings.HasPrefix(f[4], c.Root+"/")) {
				errs = append(errs, fmt.Errorf("host mount left: %s", f[4]))
			}
		}
	}
	// Cgroup directories.
	if entries, err := os.ReadDir("/sys/fs/cgroup"); err == nil {
		for _, e := range entries {
			p := filepath.Join("/sys/fs/cgroup", e.Name(), c.cgroupName)
			if fileExists(p) {
				errs = append(errs, fmt.Errorf("cgroup left: %s", p))
			}
		}
	}
	// The kubelet's global sysctls.
	for name, want := range saved {
		b, err := os.ReadFile(filepath.Join("/proc/sys", strings.ReplaceAll(name, ".", "/")))
		if err == nil && strings.TrimSpace(string(b)) != want {
			errs = append(errs, fmt.Errorf("sysctl %s is %s, was %s", name, strings.TrimSpace(string(b)), want))
		}
	}
	// Host paths a cluster writes.
	for p, existed := range c.witnessedAt {
		if !existed && fileExists(p) {
			errs = append(errs, fmt.Errorf("host path %s was created during the run", p))
		}
	}
	return errs
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
