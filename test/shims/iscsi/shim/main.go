// Package shim emulates the iSCSI initiator of a Linux host for tests on a
// machine whose kernel has no iSCSI: iscsiadm, multipath and multipathd as
// commands, and the kernel's reaction to sysfs writes as a daemon, with real
// loop devices over the LUN files of the ONTAP simulator. See README.md.
package shim

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

// Main runs the shim as the tool named by argv[0] (iscsiadm, multipath,
// multipathd), or as "iscsi-shim <command>" with command kernel, teardown,
// state or one of the tool names.
func Main(argv []string, stdout, stderr io.Writer) int {
	name, args := filepath.Base(argv[0]), argv[1:]
	if name == "iscsi-shim" {
		if len(args) == 0 {
			fmt.Fprintln(stderr, "usage: iscsi-shim kernel|teardown|state|iscsiadm|multipath|multipathd [args]")
			return 2
		}
		name, args = args[0], args[1:]
	}
	env, err := LoadEnv()
	if err != nil {
		fmt.Fprintf(stderr, "%s (ontap-csi iSCSI test shim): %v\n", name, err)
		return 1
	}
	switch name {
	case "iscsiadm":
		return env.iscsiadmMain(args, stdout, stderr)
	case "multipath":
		return env.multipathMain(args, stdout, stderr)
	case "multipathd":
		return env.multipathdMain(args, stdout, stderr)
	case "kernel":
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
		if err := env.RunKernel(stop); err != nil {
			fmt.Fprintln(stderr, "kernel:", err)
			return 1
		}
		return 0
	case "teardown":
		if err := env.Teardown(); err != nil {
			fmt.Fprintln(stderr, "teardown:", err)
			return 1
		}
		return 0
	case "state":
		st, err := LoadState(env.State)
		if err == nil {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", " ")
			err = enc.Encode(st)
		}
		if err != nil {
			fmt.Fprintln(stderr, "state:", err)
			return 1
		}
		return 0
	}
	fmt.Fprintf(stderr, "iscsi-shim: unknown command %q\n", name)
	return 2
}
