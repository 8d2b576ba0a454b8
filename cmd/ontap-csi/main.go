// Command ontap-csi is a CSI driver for NetApp ONTAP (NFS and iSCSI) and a
// drop-in replacement for the Trident CSI plugin. With no subcommand it
// serves CSI in the role given by --csi_role; see `ontap-csi --help`.
//
// The binary also answers to /trident_orchestrator, so that Trident's own
// DaemonSet and Deployment start it unchanged, and, as /bin/tridentctl, to
// the few tridentctl commands trident-operator runs in the image.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// subcommands maps a subcommand name to its entry point, which parses its own
// arguments and returns the exit code. Subcommands register themselves from
// their own files in init.
var subcommands = map[string]func(args []string) int{}

func main() {
	if filepath.Base(os.Args[0]) == tridentctlName {
		os.Exit(tridentctlMain(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, ok := subcommands[args[0]]
		if !ok {
			fmt.Fprintf(os.Stderr, "ontap-csi: unknown subcommand %q (known: %s)\n", args[0], strings.Join(subcommandNames(), ", "))
			return 2
		}
		return cmd(args[1:])
	}
	return serveMain(args)
}

func subcommandNames() []string {
	names := make([]string, 0, len(subcommands))
	for n := range subcommands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
