package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/controller/inventory"
	"github.com/ontap-csi/ontap-csi/node"
	"github.com/ontap-csi/ontap-csi/server"
)

// Roles, with Trident's value names.
const (
	roleNode       = "node"
	roleController = "controller"
	roleAllInOne   = "allInOne"
)

// options holds every setting of the serving binary. Trident's flag names use
// underscores and are kept verbatim; ontap-csi's own flags use dashes.
type options struct {
	// Trident's flags that ontap-csi implements.
	csiEndpoint string
	csiNodeName string
	csiRole     string
	logFormat   string
	logLevel    string
	debug       bool
	metrics     bool   // --metrics: serve metrics on metrics_address:metrics_port, as Trident does
	metricsHost string // --metrics_address
	metricsPort string // --metrics_port
	// Trident's REST API, Kubernetes access and persistence.
	tridentAPI tridentAPIOptions

	// ontap-csi's own flags.
	driverName           string
	kubeletDir           string
	metricsAddress       string
	nodeTopology         string
	maxVolumesPerNode    int64
	hostRoot             string
	registrationDir      string
	handoverGrace        time.Duration
	deregisterOnShutdown string
	drainTimeout         time.Duration
	backendConfigs       stringList
	// backendPollInterval is Trident's --backend_storage_poll_interval:
	// how often the controller checks its backends and lists their
	// volumes and snapshots (package inventory).
	backendPollInterval time.Duration

	// enableForceDetach is Trident's --enable_force_detach: fence a Node
	// that is not Ready before detaching from it (controller/fencing.go).
	enableForceDetach bool

	// Node data path.
	trackingDir        string
	lockDir            string
	devDir             string
	sysRoot            string
	iscsiDeviceTimeout time.Duration
	iscsiDeadGrace     time.Duration
	maxISCSIOperations int
	maxNFSMounts       int
	maxFormats         int
	initiatorName      string
	nodeIPsList        string

	// Derived by validate.
	endpointPath string
	topology     map[string]string
	nodeIPs      []string

	ignored *ignoredFlags
}

// tridentIgnored lists the flags of Trident's trident_orchestrator (20.10 and
// 26.06) that ontap-csi accepts so that Trident's DaemonSet and Deployment
// start it unchanged, but does not implement. Bool flags must be declared as
// such so that a bare "--k8s_pod" parses as Trident's does.
var tridentIgnored = map[string]bool{ // name -> is a bool flag
	"k8s_config_path": false, "volume_driver": false, "driver_port": false, "config": false, "docker_plugin_mode": true,
	"csi_unsafe_detach": true, "node_prep": true,
	"no_persistence": true, "passthrough": true,
	"http_request_timeout": false, "aes_key": false,
	"https_metrics_address": false, "https_metrics_port": false, "https_metrics": true,
	"disable_audit_log": true, "log_workflows": false, "log_layers": false,
	"enable_acp": true, "acp_address": false,
	"iscsi_self_healing_interval": false, "iscsi_self_healing_wait_time": false,
	"nvme_self_healing_interval": false, "enable_concurrency": true,
	"autogrow_period": false, "tagri_timeout": false,
}

// ignoredFlags records which of the ignored Trident flags were given.
type ignoredFlags struct{ set map[string]string }

type ignoredFlag struct {
	name   string
	isBool bool
	into   *ignoredFlags
}

func (f *ignoredFlag) String() string   { return "" }
func (f *ignoredFlag) IsBoolFlag() bool { return f.isBool }
func (f *ignoredFlag) Set(v string) error {
	if f.isBool {
		if _, err := strconv.ParseBool(v); err != nil {
			return fmt.Errorf("not a boolean: %q", v)
		}
	}
	f.into.set[f.name] = v
	return nil
}

// Given returns the ignored flags that were set, as "--name=value", sorted.
func (i *ignoredFlags) Given() []string {
	out := make([]string, 0, len(i.set))
	for name, v := range i.set {
		out = append(out, "--"+name+"="+v)
	}
	sort.Strings(out)
	return out
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error {
	if strings.TrimSpace(v) == "" {
		return errors.New("empty value")
	}
	*l = append(*l, v)
	return nil
}

// usageError is a bad command line: exit code 2 and one line.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

func newFlagSet(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("ontap-csi", flag.ContinueOnError)
	fs.SetOutput(io.Discard)

	fs.StringVar(&o.csiEndpoint, "csi_endpoint", "", "CSI endpoint, unix://plugin/csi.sock (Trident's form, meaning /plugin/csi.sock) or unix:///abs/path.sock")
	fs.StringVar(&o.csiNodeName, "csi_node_name", "", "Kubernetes node name; the CSI node id (required in node and allInOne roles)")
	fs.StringVar(&o.csiRole, "csi_role", "", "role: node, controller or allInOne")
	fs.StringVar(&o.logFormat, "log_format", "text", "log format: text or json")
	fs.StringVar(&o.logLevel, "log_level", "info", "log level: trace, debug, info, warn, error")
	fs.BoolVar(&o.debug, "debug", false, "debug logging (same as --log_level=debug)")
	fs.BoolVar(&o.metrics, "metrics", false, "serve metrics on --metrics_address:--metrics_port (Trident's flags; --metrics-address wins)")
	fs.StringVar(&o.metricsHost, "metrics_address", "", "Trident's metrics address, used with --metrics")
	fs.StringVar(&o.metricsPort, "metrics_port", "8001", "Trident's metrics port, used with --metrics")
	fs.BoolVar(&o.enableForceDetach, "enable_force_detach", false, "controller: a detach from a Node that is not Ready (or gone) first fences it on ONTAP, as one from a Node with the node.kubernetes.io/out-of-service taint always does (Trident's flag; docs/design/fencing.md §2)")
	o.tridentAPI.register(fs)

	fs.StringVar(&o.driverName, "driver-name", "csi.trident.netapp.io", "CSI driver name")
	fs.StringVar(&o.kubeletDir, "kubelet-dir", envOr("KUBELET_DIR", "/var/lib/kubelet"), "kubelet root directory on the host (default from $KUBELET_DIR, else /var/lib/kubelet)")
	fs.StringVar(&o.metricsAddress, "metrics-address", "", "host:port for /healthz, /readyz and /metrics (empty: off unless --metrics)")
	fs.StringVar(&o.nodeTopology, "node-topology", "", "topology segments reported by NodeGetInfo, key=value[,key=value...] (default: in a pod, the topology.kubernetes.io labels of the --csi_node_name Node, read at start)")
	// Trident has no such flag; the name is csi-driver-nfs's and TopoLVM's.
	fs.Int64Var(&o.maxVolumesPerNode, "max-volumes-per-node", 0, "volumes of this driver the scheduler may place on the node, reported by NodeGetInfo (0: no limit)")
	fs.StringVar(&o.hostRoot, "host-root", hostRootAuto, "where the host's root filesystem is mounted in the container; host tools run chrooted into it. \"auto\": /host when it holds a root filesystem (Trident's DaemonSet mounts it there), else none")
	fs.StringVar(&o.registrationDir, "registration-dir", "", "kubelet plugin registration directory as seen by this process (default <kubelet-dir>/plugins_registry, else <host-root>/<kubelet-dir>/plugins_registry)")
	fs.DurationVar(&o.handoverGrace, "handover-grace", 20*time.Second, "on SIGTERM, keep serving this long for a successor to take over (keep it below terminationGracePeriodSeconds)")
	fs.StringVar(&o.deregisterOnShutdown, "deregister-on-shutdown", "never", "never: only `ontap-csi deregister` deregisters; always: unlink the registration socket on SIGTERM like node-driver-registrar")
	fs.Var(&o.backendConfigs, "backend-config", "Trident backend config file (JSON or YAML), repeatable; controller and allInOne roles")
	fs.DurationVar(&o.backendPollInterval, "backend_storage_poll_interval", inventory.DefaultPeriod,
		"how often the controller checks every backend and lists its volumes and snapshots for the metrics and `ontap-csi backends` (Trident's flag; Trident's default is 5m)")
	fs.StringVar(&o.trackingDir, "tracking-dir", node.DefaultTrackingDir, "per-volume node state, in Trident's format (shared with Trident)")
	fs.StringVar(&o.lockDir, "lock-dir", "", "per-volume lock files, shared by every plugin generation on the node (default <dir of --csi_endpoint>/locks)")
	fs.StringVar(&o.devDir, "dev-dir", "/dev", "where /dev is (tests point it elsewhere)")
	fs.StringVar(&o.sysRoot, "sys-root", "/sys", "where /sys is (tests point it elsewhere)")
	fs.DurationVar(&o.iscsiDeviceTimeout, "iscsi-device-timeout", node.DefaultISCSIDeviceTimeout, "how long iSCSI attach, detach and resize wait for the kernel")
	fs.DurationVar(&o.iscsiDeadGrace, "iscsi-dead-path-grace", node.DefaultISCSIDeadPathGrace, "how long an unstage lets a LUN with no usable path queue I/O for a path to come back before it fails the I/O")
	fs.IntVar(&o.maxISCSIOperations, "max-iscsi-operations", node.DefaultMaxISCSIOperations, "concurrent iSCSI attach, detach and resize (Trident: 5 iSCSI stages and 10 unstages at once)")
	fs.IntVar(&o.maxNFSMounts, "max-nfs-mounts", node.DefaultMaxNFSMounts, "concurrent NFS mounts (Trident: 10)")
	fs.IntVar(&o.maxFormats, "max-formats", node.DefaultMaxFormats, "concurrent mkfs runs")
	fs.StringVar(&o.initiatorName, "iscsi-initiator-name", "", "the node's iSCSI initiator name (default: read from <host-root>/etc/iscsi/initiatorname.iscsi)")
	fs.StringVar(&o.nodeIPsList, "node-ips", "", "the node's IP addresses for NFS export rules, comma-separated (default: those of the default-route interfaces)")
	fs.DurationVar(&o.drainTimeout, "drain-timeout", 10*time.Second, "on shutdown, how long calls in flight may take to finish")

	o.ignored = &ignoredFlags{set: map[string]string{}}
	for name, isBool := range tridentIgnored {
		fs.Var(&ignoredFlag{name: name, isBool: isBool, into: o.ignored}, name, "accepted for Trident compatibility; ignored")
	}
	return fs
}

// parseOptions parses and validates the serving command line. A returned
// usageError is one line meant for the user.
func parseOptions(args []string) (*options, *flag.FlagSet, error) {
	o := &options{}
	fs := newFlagSet(o)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, fs, err
		}
		return nil, fs, usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return nil, fs, usagef("unexpected argument %q", fs.Arg(0))
	}
	return o, fs, o.validate()
}

// validate checks the options and derives what serving needs from them. A
// failure is a usageError naming the flag.
func (o *options) validate() error {
	for _, check := range []func() error{o.validateRole, o.validateServing, o.validateNodeDataPath} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// validateRole checks the role and what it requires: the endpoint, a node
// name, and the Trident API flags that fit it.
func (o *options) validateRole() error {
	switch o.csiRole {
	case roleNode, roleController, roleAllInOne:
	case "":
		return usagef("--csi_role is required (node, controller or allInOne)")
	default:
		return usagef("--csi_role %q is not one of node, controller, allInOne", o.csiRole)
	}
	if o.csiEndpoint == "" {
		return usagef("--csi_endpoint is required, e.g. unix:///var/lib/kubelet/plugins/csi.trident.netapp.io/csi.sock")
	}
	p, err := server.ParseEndpoint(o.csiEndpoint)
	if err != nil {
		return usagef("--csi_endpoint: %v", err)
	}
	o.endpointPath = p
	if o.csiRole != roleController && strings.TrimSpace(o.csiNodeName) == "" {
		return usagef("--csi_node_name is required in the %s role (Trident's DaemonSet passes $(KUBE_NODE_NAME))", o.csiRole)
	}
	if o.csiRole == roleNode && len(o.backendConfigs) > 0 {
		return usagef("--backend-config is only used in the controller and allInOne roles")
	}
	return o.tridentAPI.validate(o.csiRole)
}

// validateServing checks logging, the kubelet handover and shutdown, and
// the health and metrics address.
func (o *options) validateServing() error {
	if o.logFormat != "text" && o.logFormat != "json" {
		return usagef("--log_format %q is not one of text, json", o.logFormat)
	}
	if _, err := logrus.ParseLevel(o.logLevel); err != nil {
		return usagef("--log_level %q is not one of trace, debug, info, warn, error, fatal", o.logLevel)
	}
	if o.deregisterOnShutdown != "never" && o.deregisterOnShutdown != "always" {
		return usagef("--deregister-on-shutdown %q is not one of never, always", o.deregisterOnShutdown)
	}
	if o.handoverGrace < 0 {
		return usagef("--handover-grace %s must not be negative", o.handoverGrace)
	}
	if o.drainTimeout <= 0 {
		return usagef("--drain-timeout %s must be positive", o.drainTimeout)
	}
	if o.backendPollInterval < 10*time.Second {
		return usagef("--backend_storage_poll_interval %s must be at least 10s", o.backendPollInterval)
	}
	if o.driverName == "" {
		return usagef("--driver-name must not be empty")
	}
	if !strings.HasPrefix(o.kubeletDir, "/") {
		return usagef("--kubelet-dir %q must be an absolute path", o.kubeletDir)
	}
	if o.metricsAddress == "" && o.metrics {
		o.metricsAddress = net.JoinHostPort(o.metricsHost, o.metricsPort)
	}
	if o.metricsAddress != "" {
		if _, _, err := net.SplitHostPort(o.metricsAddress); err != nil {
			return usagef("--metrics-address %q: %v", o.metricsAddress, err)
		}
	}
	return nil
}

// validateNodeDataPath checks the node's limits, paths and identity (host
// root, topology, addresses).
func (o *options) validateNodeDataPath() error {
	for name, v := range map[string]int{"--max-iscsi-operations": o.maxISCSIOperations, "--max-nfs-mounts": o.maxNFSMounts, "--max-formats": o.maxFormats} {
		if v < 1 {
			return usagef("%s %d must be at least 1", name, v)
		}
	}
	if o.maxVolumesPerNode < 0 {
		return usagef("--max-volumes-per-node %d must not be negative", o.maxVolumesPerNode)
	}
	if o.iscsiDeviceTimeout <= 0 {
		return usagef("--iscsi-device-timeout %s must be positive", o.iscsiDeviceTimeout)
	}
	if o.iscsiDeadGrace <= 0 {
		return usagef("--iscsi-dead-path-grace %s must be positive", o.iscsiDeadGrace)
	}
	for name, dir := range map[string]string{"--tracking-dir": o.trackingDir, "--dev-dir": o.devDir, "--sys-root": o.sysRoot} {
		if !strings.HasPrefix(dir, "/") {
			return usagef("%s %q must be an absolute path", name, dir)
		}
	}
	if o.lockDir == "" {
		o.lockDir = filepath.Join(filepath.Dir(o.endpointPath), "locks")
	} else if !strings.HasPrefix(o.lockDir, "/") {
		return usagef("--lock-dir %q must be an absolute path", o.lockDir)
	}
	hostRoot, err := resolveHostRoot(o.hostRoot)
	if err != nil {
		return usagef("--host-root: %v", err)
	}
	o.hostRoot = hostRoot
	topo, err := parseTopology(o.nodeTopology)
	if err != nil {
		return usagef("--node-topology: %v", err)
	}
	o.topology = topo
	ips, err := parseIPs(o.nodeIPsList)
	if err != nil {
		return usagef("--node-ips: %v", err)
	}
	o.nodeIPs = ips
	return nil
}

func parseIPs(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []string
	for _, v := range strings.Split(s, ",") {
		ip, err := netip.ParseAddr(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("%q is not an IP address", v)
		}
		out = append(out, ip.String())
	}
	return out, nil
}

func parseTopology(s string) (map[string]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("%q is not key=value", kv)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("key %q given twice", k)
		}
		out[k] = v
	}
	return out, nil
}

const hostRootAuto = "auto"

// resolveHostRoot turns --host-root into a directory or "" (run tools here).
// "auto" exists for drop-in use: Trident's DaemonSet mounts the host's / at
// /host and finds host tools through chwrap symlinks in its own image, which
// ours does not carry, so the host root must be found without a new flag.
func resolveHostRoot(v string) (string, error) {
	switch v {
	case hostRootAuto:
		if fi, err := os.Stat("/host/usr"); err == nil && fi.IsDir() {
			return "/host", nil
		}
		return "", nil
	case "", "/":
		return "", nil
	}
	if !strings.HasPrefix(v, "/") {
		return "", fmt.Errorf("%q must be an absolute path", v)
	}
	if fi, err := os.Stat(v); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%q is not a directory", v)
	}
	return filepath.Clean(v), nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func printUsage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprintf(w, "Usage: ontap-csi [flags]            serve CSI in the role given by --csi_role\n")
	fmt.Fprintf(w, "       ontap-csi <subcommand> [...]  one of: %s\n\nFlags:\n", strings.Join(subcommandNames(), ", "))
	fs.VisitAll(func(f *flag.Flag) {
		if _, ignored := tridentIgnored[f.Name]; ignored {
			return
		}
		fmt.Fprintf(w, "  --%s\n    \t%s", f.Name, f.Usage)
		if f.DefValue != "" && f.DefValue != "false" {
			fmt.Fprintf(w, " (default %q)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
	fmt.Fprintf(w, "\nTrident flags accepted and ignored: ")
	names := make([]string, 0, len(tridentIgnored))
	for n := range tridentIgnored {
		names = append(names, "--"+n)
	}
	sort.Strings(names)
	fmt.Fprintln(w, strings.Join(names, " "))
}
