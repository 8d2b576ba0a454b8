// Command ontap-sim serves the ONTAP REST simulator (test/ontapsim) for the
// demo, the tests and anyone trying ontap-csi without an ONTAP cluster. It is
// a command of its own so that the product binary and image carry no
// simulator code.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

const simUsageHead = `usage: ontap-sim [flags]

Runs the ONTAP REST simulator (ONTAP 9 /api subset used by ontap-nas,
ontap-san and their economy variants, plus the test data plane under /sim). Prints one line
"listening on <url>" on stdout once it serves; logs go to stderr. SIGTERM or
SIGINT stops it (saving the state when --data-dir is set).

A backend config whose managementLIF is the printed host:port and whose svm,
username and password match works against it unchanged (trust the CA in
<data-dir>/tls/ca.pem, or GET /sim/tls/ca.pem, or use --insecure-http).

Flags:
`

type simOptions struct {
	listen, dataDir, svm, username, password string
	insecureHTTP, qtreeQuotaMounts           bool
	latency, faults, version, logLevel       string
	logFormat, nfsLIFs, iscsiLIFs            string
	dataPlane, nfsRoot                       string
	seed                                     uint64
	nodes                                    int
}

func newSimFlagSet(o *simOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("ontap-sim", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.listen, "listen", "127.0.0.1:8443", "address to serve on; port 0 picks a free port")
	fs.StringVar(&o.dataDir, "data-dir", "", "state.json, TLS CA and backing files; state survives restarts (default: a temporary directory, removed on exit)")
	fs.StringVar(&o.svm, "svm", "svm0", "name of the data SVM")
	fs.StringVar(&o.username, "username", "admin", "API user name (basic auth, or the CN of a client certificate)")
	fs.StringVar(&o.password, "password", envOr("ONTAP_SIM_PASSWORD", "password"), "API password (default from $ONTAP_SIM_PASSWORD, else \"password\")")
	fs.BoolVar(&o.insecureHTTP, "insecure-http", false, "serve plain HTTP instead of HTTPS")
	fs.StringVar(&o.latency, "latency", "off", "latency model: off or realistic (docs/design/ontap-rest.md §4.7)")
	fs.StringVar(&o.faults, "faults", "", "fault injection rules, see below")
	fs.Uint64Var(&o.seed, "seed", 0, "seed for fault and latency draws (0: random)")
	fs.StringVar(&o.version, "ontap-version", "9.15.1", "ONTAP version reported by /api/cluster (9.16.1+ makes LUN operations asynchronous)")
	fs.IntVar(&o.nodes, "nodes", 2, "cluster nodes, in HA pairs; one aggregate and one iSCSI LIF each")
	fs.StringVar(&o.nfsLIFs, "nfs-lifs", "", "comma-separated NFS data LIF addresses (default 127.0.0.10)")
	fs.StringVar(&o.iscsiLIFs, "iscsi-lifs", "", "comma-separated iSCSI data LIF addresses (default 127.0.0.11, 127.0.0.12, ...)")
	fs.StringVar(&o.dataPlane, "dataplane", ontapsim.DataPlaneFile, "data plane: file (the /sim endpoints of the test shims) or kernel (LIO and nfsd of this kernel serve the LUNs and exports; root; see docs/vm.md)")
	fs.StringVar(&o.nfsRoot, "nfs-root", "/srv/ontap-sim/nfs", "kernel data plane: where volumes are mounted at their junction paths; nfs.conf's [exports] rootdir must name it")
	fs.BoolVar(&o.qtreeQuotaMounts, "qtree-quota-mounts", false, "make every qtree a tmpfs of its tree quota, so sizes are enforced on the file data plane (needs root)")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: trace, debug, info, warn, error")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	return fs
}

func printSimUsage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprint(w, simUsageHead)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	fmt.Fprintf(w, "\n--faults %s\n", ontapsim.FaultSyntax)
}

// simConfig validates the options into a simulator configuration.
func (o *simOptions) simConfig() (ontapsim.Config, error) {
	cfg := ontapsim.Config{
		SVM: o.svm, Username: o.username, Password: o.password, ONTAPVersion: o.version,
		Nodes: o.nodes, DataDir: o.dataDir, Seed: o.seed, DataPlane: o.dataPlane, NFSRoot: o.nfsRoot,
		QtreeQuotaMounts: o.qtreeQuotaMounts,
	}
	if o.dataPlane != ontapsim.DataPlaneFile && o.dataPlane != ontapsim.DataPlaneKernel {
		return cfg, fmt.Errorf("--dataplane %q: want file or kernel", o.dataPlane)
	}
	if o.username == "" || o.password == "" {
		return cfg, errors.New("--username and --password must not be empty")
	}
	if _, _, err := net.SplitHostPort(o.listen); err != nil {
		return cfg, fmt.Errorf("--listen %q: %v", o.listen, err)
	}
	if o.logFormat != "text" && o.logFormat != "json" {
		return cfg, fmt.Errorf("--log-format %q: want text or json", o.logFormat)
	}
	if _, err := logrus.ParseLevel(o.logLevel); err != nil {
		return cfg, fmt.Errorf("--log-level %q: want trace, debug, info, warn or error", o.logLevel)
	}
	var err error
	if cfg.Latency, err = ontapsim.ParseLatency(o.latency); err != nil {
		return cfg, fmt.Errorf("--latency: %v", err)
	}
	if cfg.Faults, err = ontapsim.ParseFaults(o.faults); err != nil {
		return cfg, fmt.Errorf("--faults: %v", err)
	}
	for flagName, list := range map[string]*[]string{"nfs-lifs": &cfg.NFSLIFs, "iscsi-lifs": &cfg.ISCSILIFs} {
		val := o.nfsLIFs
		if flagName == "iscsi-lifs" {
			val = o.iscsiLIFs
		}
		for _, ip := range strings.Split(val, ",") {
			ip = strings.TrimSpace(ip)
			if ip == "" {
				continue
			}
			if net.ParseIP(ip) == nil {
				return cfg, fmt.Errorf("--%s: %q is not an IP address", flagName, ip)
			}
			*list = append(*list, ip)
		}
	}
	return cfg, nil
}

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	o := &simOptions{}
	fs := newSimFlagSet(o)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printSimUsage(fs, os.Stdout)
			return 0
		}
		fmt.Fprintf(os.Stderr, "ontap-sim: %v (see ontap-sim --help)\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "ontap-sim: unexpected argument %q (see ontap-sim --help)\n", fs.Arg(0))
		return 2
	}
	cfg, err := o.simConfig()
	if err != nil {
		fmt.Fprintf(os.Stderr, "ontap-sim: %v\n", err)
		return 2
	}
	setupLogging(o.logFormat, o.logLevel)

	// Subscribe before serving so a signal right after the "listening" line
	// is not lost.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)

	s, err := ontapsim.New(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "ontap-sim: %v\n", err)
		return 1
	}
	url, err := s.Start(o.listen, !o.insecureHTTP)
	if err != nil {
		s.Close()
		fmt.Fprintf(os.Stderr, "ontap-sim: %v\n", err)
		return 1
	}
	fmt.Printf("listening on %s\n", url)

	sig := <-sigs
	logrus.WithField("signal", sig.String()).Info("ONTAP simulator stopping")
	if err := s.Close(); err != nil {
		logrus.WithError(err).Error("ONTAP simulator: shutdown failed")
		return 1
	}
	return 0
}

func setupLogging(format, level string) {
	logrus.SetOutput(os.Stderr)
	if format == "json" {
		logrus.SetFormatter(&logrus.JSONFormatter{TimestampFormat: "2006-01-02T15:04:05.000Z07:00"})
	} else {
		logrus.SetFormatter(&logrus.TextFormatter{FullTimestamp: true, TimestampFormat: "2006-01-02T15:04:05.000Z07:00"})
	}
	if lvl, err := logrus.ParseLevel(level); err == nil {
		logrus.SetLevel(lvl)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
