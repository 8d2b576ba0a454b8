package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ontap-csi/ontap-csi/registration"
)

func init() { subcommands["status"] = runStatus }

// nodeDirFlags are the flags status and deregister share to find the
// plugin dir and kubelet's registration dir on this node.
type nodeDirFlags struct {
	kubeletDir, driverName, pluginDir, registrationDir, hostRoot string
}

func (d *nodeDirFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&d.kubeletDir, "kubelet-dir", envOr("KUBELET_DIR", "/var/lib/kubelet"), "kubelet root directory on the host")
	fs.StringVar(&d.driverName, "driver-name", "csi.trident.netapp.io", "CSI driver name")
	fs.StringVar(&d.pluginDir, "plugin-dir", "", "plugin dir as seen here (default <kubelet-dir>/plugins/<driver-name>, else under --host-root)")
	fs.StringVar(&d.registrationDir, "registration-dir", "", "kubelet plugin registration dir as seen here (default <kubelet-dir>/plugins_registry, else under --host-root)")
	fs.StringVar(&d.hostRoot, "host-root", hostRootAuto, "where the host's root filesystem is mounted here; \"auto\": /host when it holds a root filesystem (Trident's DaemonSet mounts it there), else none")
}

// resolve returns the plugin and registration dirs.
func (d *nodeDirFlags) resolve() (pluginDir, regDir string, err error) {
	if !strings.HasPrefix(d.kubeletDir, "/") {
		return "", "", fmt.Errorf("--kubelet-dir %q must be an absolute path", d.kubeletDir)
	}
	if d.driverName == "" || strings.ContainsRune(d.driverName, '/') {
		return "", "", fmt.Errorf("--driver-name %q is not a driver name", d.driverName)
	}
	// As the server resolves it, so that status in the node container
	// looks where the plugin does.
	if d.hostRoot, err = resolveHostRoot(d.hostRoot); err != nil {
		return "", "", fmt.Errorf("--host-root: %v", err)
	}
	return registration.ResolvePluginDir(d.kubeletDir, d.driverName, d.hostRoot, d.pluginDir),
		registration.ResolveRegistrationDir(d.kubeletDir, d.hostRoot, d.registrationDir), nil
}

// parseSubcommand parses args; done reports that the caller should return
// code at once (help or a usage error).
func parseSubcommand(fs *flag.FlagSet, args []string) (code int, done bool) {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(os.Stdout)
			fmt.Printf("usage: ontap-csi %s [flags]\n", fs.Name())
			fs.PrintDefaults()
			return 0, true
		}
		// One line, as for the server's flags.
		fmt.Fprintf(os.Stderr, "ontap-csi %s: %v (see ontap-csi %s --help)\n", fs.Name(), err, fs.Name())
		return 2, true
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "ontap-csi %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return 2, true
	}
	return 0, false
}

// runStatus prints the node lease, the generations on disk, which of them
// are alive, and the sockets, read from the plugin and registration dirs.
func runStatus(args []string) int {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	var dirs nodeDirFlags
	dirs.register(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	if code, done := parseSubcommand(fs, args); done {
		return code
	}
	pluginDir, regDir, err := dirs.resolve()
	if err != nil {
		fmt.Fprintf(os.Stderr, "ontap-csi status: %v\n", err)
		return 2
	}
	st, err := registration.Status(pluginDir, regDir, dirs.driverName)
	if err != nil {
		fmt.Fprintf(os.Stderr, "ontap-csi status: %v\n", err)
		return 1
	}
	if !printResult("status", *asJSON, st, func(w io.Writer) error { return writeStatus(w, st) }) {
		return 1
	}
	if st.RegistrationError != "" {
		return 1 // reported above; the registration sockets are unknown
	}
	return 0
}

// printResult prints a subcommand's result as indented JSON or as text,
// and reports whether that worked (a failure is said on stderr).
func printResult(cmd string, asJSON bool, v any, text func(io.Writer) error) bool {
	var err error
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(v)
	} else {
		err = text(os.Stdout)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "ontap-csi %s: %v\n", cmd, err)
		return false
	}
	return true
}

func writeStatus(w io.Writer, st *registration.NodeStatus) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "plugin dir:\t%s\n", st.PluginDir)
	fmt.Fprintf(tw, "registration dir:\t%s\n", st.RegistrationDir)
	if st.RegistrationError != "" {
		fmt.Fprintf(tw, "registration dir error:\t%s\n", st.RegistrationError)
	}
	if l := st.Lease; l != nil {
		alive := "dead"
		if st.HolderAlive {
			alive = "alive"
		}
		fmt.Fprintf(tw, "lease:\tgeneration %d, phase %s, holder %s, updated %s\n", l.Generation, l.Phase, alive, l.UpdatedAt.Format(time.RFC3339))
		fmt.Fprintf(tw, "holder:\tpod %s (uid %s), pid %d, started %s\n", orDash(l.Holder.Pod), orDash(l.Holder.PodUID), l.Holder.PID, l.Holder.StartedAt.Format(time.RFC3339))
		fmt.Fprintf(tw, "registration socket:\t%s\n", orDash(l.RegistrationSocket))
		fmt.Fprintf(tw, "node info:\tid %s, topology %s\n", orDash(l.NodeInfo.NodeID), topologyString(l.NodeInfo.Topology))
	} else {
		fmt.Fprintf(tw, "lease:\t%s\n", st.LeaseError)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "GENERATION\tALIVE\tHOLDER\tREGISTRATION SOCKET")
	for _, g := range st.Generations {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", g.Generation, yesNo(g.Alive), yesNo(g.Holder), orDash(g.RegistrationSocket))
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "SOCKET\tROLE\tGENERATION\tLISTENING")
	for _, s := range st.Sockets {
		gen := "-"
		if s.Generation != 0 {
			gen = fmt.Sprint(s.Generation)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Path, s.Role, gen, yesNo(s.Listening))
	}
	return tw.Flush()
}

func topologyString(t map[string]string) string {
	if len(t) == 0 {
		return "-"
	}
	kv := make([]string, 0, len(t))
	for k, v := range t {
		kv = append(kv, k+"="+v)
	}
	sort.Strings(kv)
	return strings.Join(kv, ",")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
