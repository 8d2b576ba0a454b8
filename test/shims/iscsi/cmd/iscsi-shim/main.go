// Command iscsi-shim is the iSCSI initiator emulation of the tests: installed
// as iscsiadm, multipath and multipathd, and run as "iscsi-shim kernel" for
// the kernel side. See test/shims/iscsi/README.md.
package main

import (
	"os"

	"github.com/ontap-csi/ontap-csi/test/shims/iscsi/shim"
)

func main() {
	os.Exit(shim.Main(os.Args, os.Stdout, os.Stderr))
}
