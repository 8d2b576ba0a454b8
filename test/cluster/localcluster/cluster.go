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
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
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

	"github.com/ontap-csi/ontap-csi/test/cluster/internal/loopdev"
)

// The cluster's fixed addresses, all inside the nodes' network namespaces.
// Node i has the address 10.250.0.(10+i) and the pod subnet 10.252.i.0/24
// (nodeAddress, nodePodCIDR); the first node also runs the API server.
const (
	ServiceCIDR = "10.251.0.0/24"
	// serviceIP is the "kubernetes" Service's ClusterIP; nodens forwards it
	// to the API server in place of kube-proxy.
	serviceIP     = "10.251.0.1"
	clusterDNSIP  = "10.251.0.10"
	apiServerPort = 6443
	PauseImage    = "localhost/pause:e2e"
)

// APIServerIP is where the API server listens: the first node's address.
var APIServerIP = nodeAddress(0)

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
	// Nodes is the number of nodes (default 1), each with its own kubelet
	// and containerd; the first also runs the control plane.
	Nodes int
	Kube  KubeBinaries
	// NodeNS is the built cmd/nodens.
	NodeNS string
	// Archives are docker-archive images to import on every node; one must
	// be PauseImage.
	Archives []string
	// NodeFiles maps a path on each node to a file here. The path must lie in
	// one of the overlaid directories (/var/lib, /var/log, /opt,
	// /usr/libexec, /usr/sbin, /etc); the host never sees it.
	NodeFiles map[string]string
	// NodeDirs are directories each node has of its own, bind-mounted from
	// the node's root (Node.DirSource), not overlays: tools that watch
	// them with inotify see every change.
	NodeDirs []string
	// Forwards maps a socket name to a TCP address inside the first node's
	// network namespace: the test dials the unix socket ForwardSocket(name)
	// to reach a server there (the API server has one already).
	Forwards map[string]string
	// KubeletVerbosity is the kubelet's -v (default 2).
	KubeletVerbosity int
	Logf             func(format string, args ...any)
}

// Cluster is a running cluster.
type Cluster struct {
	Root            string
	LogDir          string
	AdminKubeconfig string
	RESTConfig      *rest.Config
	Client          kubernetes.Interface
	Nodes           []*Node

	cfg          Config
	cgroupName   string
	pki          *pki
	controlPlane []*Process // start order; stopped in reverse
	apiSock      string
	witnessedAt  map[string]bool
	logf         func(string, ...any)
}

// Start brings the cluster up to Ready nodes with a default ServiceAccount.
// On error everything started so far is torn down again.
func Start(ctx context.Context, cfg Config) (c *Cluster, err error) {
	logf := cfg.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if cfg.Nodes == 0 {
		cfg.Nodes = 1
	}
	// Short: unix socket paths under it must stay below 108 bytes.
	root, err := os.MkdirTemp("", "occ-")
	if err != nil {
		return nil, err
	}
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	c = &Cluster{
		Root:        root,
		LogDir:      filepath.Join(root, "logs"),
		apiSock:     filepath.Join(root, "apiserver.sock"),
		cfg:         cfg,
		cgroupName:  "ontap-csi-e2e-" + hex.EncodeToString(suffix),
		witnessedAt: map[string]bool{},
		logf:        logf,
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
	if err := c.startNodes(ctx); err != nil {
		return c, err
	}
	step(fmt.Sprintf("%d nodes: namespaces, network, PKI, containerd, images", len(c.Nodes)))
	if err := c.startControlPlane(ctx); err != nil {
		return c, err
	}
	step("API server ready")
	for _, n := range c.Nodes {
		if err := n.startKubelet(); err != nil {
			return c, err
		}
	}
	for _, n := range c.Nodes {
		if err := c.waitNodeReady(ctx, n, 2*time.Minute); err != nil {
			return c, err
		}
	}
	step("nodes Ready")
	if err := poll(ctx, 2*time.Minute, func() (bool, error) {
		_, err := c.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		return c, fmt.Errorf("default ServiceAccount: %w", err)
	}
	step("default ServiceAccount exists")
	return c, nil
}

// startNodes creates every node's namespaces, joins their networks, writes
// the PKI and starts containerd on each with the images imported.
func (c *Cluster) startNodes(ctx context.Context) error {
	if err := os.MkdirAll(c.LogDir, 0o755); err != nil {
		return err
	}
	for i := 0; i < c.cfg.Nodes; i++ {
		n := c.newNode(i)
		c.Nodes = append(c.Nodes, n)
		if err := n.start(); err != nil {
			return err
		}
	}
	if len(c.Nodes) > 1 {
		if err := c.connect(); err != nil {
			return err
		}
	}
	if err := c.writePKI(); err != nil {
		return err
	}
	for _, n := range c.Nodes {
		if err := n.writeCNIConfig(); err != nil {
			return err
		}
		if err := n.startContainerd(ctx); err != nil {
			return err
		}
		for _, a := range c.cfg.Archives {
			if err := n.ImportImage(ctx, a); err != nil {
				return err
			}
		}
	}
	return nil
}

// Node returns the node with that name.
func (c *Cluster) Node(name string) *Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// StartProcess runs a daemon in the first node's namespaces (the ONTAP
// simulator); it is stopped at teardown.
func (c *Cluster) StartProcess(name string, argv, env []string) (*Process, error) {
	return c.Nodes[0].StartProcess(name, argv, env)
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
	apiIPs := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(serviceIP)}
	for _, n := range c.Nodes {
		apiIPs = append(apiIPs, net.ParseIP(n.IP))
	}
	specs := []certSpec{
		{name: "apiserver", cn: "kube-apiserver", server: true, ips: apiIPs,
			dns: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}},
		{name: "admin", cn: "e2e-admin", orgs: []string{"system:masters"}, client: true},
		{name: "apiserver-kubelet-client", cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}, client: true},
		{name: "controller-manager", cn: "system:kube-controller-manager", client: true},
		{name: "scheduler", cn: "system:kube-scheduler", client: true},
	}
	users := []string{"admin", "controller-manager", "scheduler"}
	for _, n := range c.Nodes {
		specs = append(specs,
			certSpec{name: n.Name + "-kubelet", cn: "system:node:" + n.Name, orgs: []string{"system:nodes"}, client: true},
			certSpec{name: n.Name + "-kubelet-serving", cn: n.Name, server: true, ips: []net.IP{net.ParseIP(n.IP)}, dns: []string{n.Name}})
		users = append(users, n.Name+"-kubelet")
	}
	for _, s := range specs {
		if err := p.issue(s); err != nil {
			return err
		}
	}
	if err := p.serviceAccountKeys(); err != nil {
		return err
	}
	server := "https://" + net.JoinHostPort(APIServerIP, strconv.Itoa(apiServerPort))
	for _, user := range users {
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
	// The test runs outside the nodes' network namespaces; nodens forwards
	// this unix socket to the API server inside the first.
	rc.Dial = func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", c.apiSock)
	}
	rc.QPS, rc.Burst = 100, 200
	c.RESTConfig = rc
	c.Client, err = kubernetes.NewForConfig(rc)
	return err
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
			"--bind-address=0.0.0.0", "--secure-port=" + strconv.Itoa(apiServerPort), "--advertise-address=" + APIServerIP,
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
		if err := c.startControlProcess(d.name, d.argv); err != nil {
			return err
		}
	}
	if err := poll(ctx, 3*time.Minute, func() (bool, error) {
		for _, proc := range c.controlPlane {
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
		if err := c.startControlProcess(d.name, d.argv); err != nil {
			return err
		}
	}
	return nil
}

// startControlProcess runs a control-plane daemon in the first node's
// namespaces.
func (c *Cluster) startControlProcess(name string, argv []string) error {
	p := &Process{Name: name, Log: filepath.Join(c.LogDir, name+".log"), argv: argv}
	if err := p.start(c.Nodes[0].nodeNS.pid); err != nil {
		return err
	}
	c.controlPlane = append(c.controlPlane, p)
	return nil
}

func (c *Cluster) waitNodeReady(ctx context.Context, n *Node, timeout time.Duration) error {
	var last string
	err := poll(ctx, timeout, func() (bool, error) {
		if exited, err := n.Kubelet.Exited(); exited {
			return false, fmt.Errorf("kubelet of %s exited: %v (see %s)", n.Name, err, n.Kubelet.Log)
		}
		obj, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for _, cond := range obj.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				last = fmt.Sprintf("%s: %s", cond.Reason, cond.Message)
				return cond.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("node %s not Ready (%s): %w", n.Name, last, err)
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
	NodeNS   []NodeNSReport // one per node, the last node's first
	Duration time.Duration
}

// Teardown stops everything, in order, and then checks that the host is as
// it was: no process left in the nodes' namespaces, no cgroup directory,
// no mount under the root, no loop device on a file under it, the kubelet's
// sysctls restored, none of the host paths a cluster writes created. Any
// difference is an error. The root directory is removed last.
func (c *Cluster) Teardown() (TeardownReport, error) {
	start := time.Now()
	var rep TeardownReport
	var errs []error
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	for _, n := range c.Nodes {
		n.stopWorkloads(ctx)
	}
	grace := map[string]time.Duration{
		// A SIGTERM'd API server drains for over a minute (docs/design/local-cluster.md §3.5).
		"kube-apiserver": 3 * time.Second, "etcd": 10 * time.Second,
	}
	for i := len(c.controlPlane) - 1; i >= 0; i-- {
		p := c.controlPlane[i]
		g, ok := grace[p.Name]
		if !ok {
			g = 5 * time.Second
		}
		p.Stop(syscall.SIGTERM, g)
	}
	for _, n := range c.Nodes {
		if n.containerd != nil {
			n.containerd.Stop(syscall.SIGTERM, 10*time.Second)
		}
	}
	var saved map[string]string
	var nsInodes []string
	// The first node last: its network namespace holds the others' bridge.
	for i := len(c.Nodes) - 1; i >= 0; i-- {
		n := c.Nodes[i]
		if n.nodeNS == nil {
			continue
		}
		if saved == nil {
			saved = n.nodeNS.sysctls
		}
		for _, ns := range []string{"mnt", "net"} {
			if id, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", n.nodeNS.pid, ns)); err == nil {
				nsInodes = append(nsInodes, id)
			}
		}
		nr, err := n.nodeNS.teardown(90 * time.Second)
		rep.NodeNS = append(rep.NodeNS, nr)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", n.Name, err))
		}
		for _, e := range nr.Errors {
			errs = append(errs, fmt.Errorf("%s: nodens: %s", n.Name, e))
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
			for _, n := range c.Nodes {
				p := filepath.Join("/sys/fs/cgroup", e.Name(), n.cgroupName)
				if fileExists(p) {
					errs = append(errs, fmt.Errorf("cgroup left: %s", p))
				}
			}
		}
	}
	// Loop devices on files under the root (the iSCSI shim's LUNs).
	for _, l := range loopdev.Under(c.Root) {
		errs = append(errs, fmt.Errorf("loop device left: %s", l))
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
