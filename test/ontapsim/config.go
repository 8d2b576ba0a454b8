package ontapsim

import (
	"fmt"
	"net"
	"regexp"
	"time"
)

// Config describes a simulated cluster. The zero value is usable: one data
// SVM "svm0" on a two-node cluster, user admin/password, no latency, no
// faults, state in a temporary directory.
type Config struct {
	ClusterName  string // default "sim-cluster"
	SVM          string // data SVM name, default "svm0"
	Username     string // default "admin"
	Password     string // default "password"
	ONTAPVersion string // "generation.major.minor", default "9.15.1"

	// Nodes is the number of cluster nodes, in HA pairs (1+2, 3+4, ...);
	// default 2. Each node gets one aggregate unless Aggregates is set.
	Nodes         int
	Aggregates    []AggregateConfig
	AggregateSize int64 // size of each default aggregate, default 10 TiB

	// Data LIF addresses of the SVM. Default NFS 127.0.0.10; iSCSI one per
	// node starting at 127.0.0.11. LIFs are placed on nodes round-robin.
	NFSLIFs   []string
	ISCSILIFs []string

	// DataDir holds state.json, the TLS CA and the backing files. Empty
	// means a temporary directory removed by Close, and no persistence.
	DataDir string

	Latency LatencyModel
	Faults  []FaultRule
	// Seed seeds the random source of faults and latency jitter; 0 picks a
	// random seed.
	Seed uint64

	// SyncDuplicateCheck makes volume POST fail synchronously with 409
	// (917526, or 13107405 while a create of that name is in flight)
	// instead of returning a job that fails. docs/design/ontap-rest.md §7 leaves this
	// open; the default (false) follows the documented async model: every
	// semantic check of a volume create runs in the job.
	SyncDuplicateCheck bool
	// AsyncLUNCreate makes LUN POST return 202 + job (ONTAP 9.16.1+
	// documents this); default follows ONTAPVersion.
	AsyncLUNCreate *bool
	// StrictVolumeDelete refuses (409, code 8) to delete a volume that is
	// still mounted or holds mapped LUNs. Real systems and Trident are
	// lenient (docs/design/ontap-rest.md §3.5, §4.5), which is the default.
	StrictVolumeDelete bool

	// NoDataUsage leaves the files in the volumes' directories out of
	// their used space, which is then what their LUNs reserve or hold. For
	// controller benchmarks, which write no data: a thin volume's space is
	// bounded by its aggregate's, which sums every volume's, so each volume
	// GET walked every volume's directory under the model's lock: 44 ms of
	// the simulator's CPU per lookup at 1,000 volumes, serializing the
	// lookups, where ONTAP's accounting costs a lookup nothing.
	NoDataUsage bool

	// QtreeQuotaMounts makes every qtree a tmpfs mount of its tree quota's
	// hard limit, so the file data plane enforces it (qtreefs.go). Needs
	// root.
	QtreeQuotaMounts bool
	// MaxLUNsPerVolume caps the LUNs of one volume; LUN creates beyond it
	// fail with 9158. Default 512, the per-volume limit NetApp documents for
	// virtual storage (docs/design/economy.md §3; hardware limits are
	// model-dependent).
	MaxLUNsPerVolume int

	// ClientCAPEM adds CAs whose client certificates are accepted for
	// certificate authentication (CN = user name). The simulator's own CA
	// is always accepted; see IssueClientCertificate.
	ClientCAPEM []byte
	// TLSHosts are extra DNS names or IPs for the server certificate.
	TLSHosts []string

	// DataPlane is DataPlaneFile (default: the /sim endpoints the test
	// shims use) or DataPlaneKernel: LIO and nfsd of the kernel the
	// simulator runs on serve the SVM's LUNs and exports (kernel.go; root,
	// in a VM: test/vm).
	DataPlane string
	// ConfigfsRoot is LIO's configfs directory (kernel data plane), default
	// /sys/kernel/config/target.
	ConfigfsRoot string
	// NFSRoot is where the kernel data plane mounts volumes at their
	// junction paths; nfs.conf's [exports] rootdir must name it. Default
	// /srv/ontap-sim/nfs.
	NFSRoot string

	JobRetention time.Duration // terminal jobs are kept this long, default 300 s
	IdleTimeout  time.Duration // keep-alive idle timeout, default 5 s as on ONTAP
}

// AggregateConfig places an aggregate on a node (0-based index).
type AggregateConfig struct {
	Name     string
	Node     int
	Size     int64
	DiskType string // default "ssd"
}

const (
	tib = int64(1) << 40
	mib = int64(1) << 20
)

var versionRE = regexp.MustCompile(`^(\d+)\.(\d+)\.(\d+)$`)

// setDefaults fills every unset field and rejects impossible values. The
// phases run in a fixed order so that the first invalid field reported stays
// the same: identity, topology, data LIFs, then the data plane.
func (c *Config) setDefaults() error {
	for _, phase := range []func() error{
		c.setIdentityDefaults,
		c.setTopologyDefaults,
		c.setLIFDefaults,
		c.setDataPlaneDefaults,
	} {
		if err := phase(); err != nil {
			return err
		}
	}
	return nil
}

// setIdentityDefaults fills the cluster, SVM, credentials and ONTAP version.
func (c *Config) setIdentityDefaults() error {
	if c.ClusterName == "" {
		c.ClusterName = "sim-cluster"
	}
	if c.SVM == "" {
		c.SVM = "svm0"
	}
	if c.Username == "" {
		c.Username = "admin"
	}
	if c.Password == "" {
		c.Password = "password"
	}
	if c.ONTAPVersion == "" {
		c.ONTAPVersion = "9.15.1"
	}
	if !versionRE.MatchString(c.ONTAPVersion) {
		return fmt.Errorf("ONTAP version %q: want generation.major.minor, e.g. 9.15.1", c.ONTAPVersion)
	}
	return nil
}

// setTopologyDefaults fills the node count, LUN limit and aggregates, and
// checks that every aggregate lives on an existing node.
func (c *Config) setTopologyDefaults() error {
	if c.Nodes == 0 {
		c.Nodes = 2
	}
	if c.Nodes < 1 || c.Nodes > 24 {
		return fmt.Errorf("nodes %d: want 1..24", c.Nodes)
	}
	if c.AggregateSize == 0 {
		c.AggregateSize = 10 * tib
	}
	if c.MaxLUNsPerVolume == 0 {
		c.MaxLUNsPerVolume = 512
	}
	if len(c.Aggregates) == 0 {
		for i := 0; i < c.Nodes; i++ {
			c.Aggregates = append(c.Aggregates, AggregateConfig{Name: fmt.Sprintf("aggr%d", i+1), Node: i, Size: c.AggregateSize})
		}
	}
	for i := range c.Aggregates {
		a := &c.Aggregates[i]
		if a.Node < 0 || a.Node >= c.Nodes {
			return fmt.Errorf("aggregate %q: node %d out of range", a.Name, a.Node)
		}
		if a.Size <= 0 {
			a.Size = c.AggregateSize
		}
		if a.DiskType == "" {
			a.DiskType = "ssd"
		}
	}
	return nil
}

// setLIFDefaults fills the NFS LIF and one iSCSI LIF per node; it runs after
// setTopologyDefaults because it needs the node count.
func (c *Config) setLIFDefaults() error {
	if len(c.NFSLIFs) == 0 {
		c.NFSLIFs = []string{"127.0.0.10"}
	}
	if len(c.ISCSILIFs) == 0 {
		for i := 0; i < c.Nodes; i++ {
			c.ISCSILIFs = append(c.ISCSILIFs, fmt.Sprintf("127.0.0.%d", 11+i))
		}
	}
	for _, ip := range append(append([]string{}, c.NFSLIFs...), c.ISCSILIFs...) {
		if net.ParseIP(ip) == nil {
			return fmt.Errorf("data LIF %q is not an IP address", ip)
		}
	}
	return nil
}

// setDataPlaneDefaults picks the data plane, its roots and the job and idle
// timeouts.
func (c *Config) setDataPlaneDefaults() error {
	switch c.DataPlane {
	case "":
		c.DataPlane = DataPlaneFile
	case DataPlaneFile, DataPlaneKernel:
	default:
		return fmt.Errorf("data plane %q: want %s or %s", c.DataPlane, DataPlaneFile, DataPlaneKernel)
	}
	if c.ConfigfsRoot == "" {
		c.ConfigfsRoot = defaultConfigfsRoot
	}
	if c.NFSRoot == "" {
		c.NFSRoot = defaultNFSRoot
	}
	if c.JobRetention == 0 {
		c.JobRetention = 300 * time.Second
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = 5 * time.Second
	}
	return nil
}

// versionAtLeast compares c.ONTAPVersion with g.m.n.
func (c *Config) versionAtLeast(g, m, n int) bool {
	var a, b, d int
	fmt.Sscanf(c.ONTAPVersion, "%d.%d.%d", &a, &b, &d)
	if a != g {
		return a > g
	}
	if b != m {
		return b > m
	}
	return d >= n
}

func (c *Config) lunCreateAsync() bool {
	if c.AsyncLUNCreate != nil {
		return *c.AsyncLUNCreate
	}
	return c.versionAtLeast(9, 16, 1)
}
