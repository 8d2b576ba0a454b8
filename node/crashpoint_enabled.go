//go:build crashpoints

package node

import (
	"fmt"
	"os"
	"syscall"
)

// Crash points for the crash tests (test/e2e). With
// ONTAP_CSI_CRASHPOINT=<step> the process SIGKILLs itself on reaching that
// step; with ONTAP_CSI_CRASHPOINT_LOG=<file> it appends every step reached,
// so a test can first learn the steps of an operation, then kill at each.
var (
	crashAt  = os.Getenv("ONTAP_CSI_CRASHPOINT")
	crashLog = os.Getenv("ONTAP_CSI_CRASHPOINT_LOG")
)

func crashpoint(step string) {
	if crashLog != "" {
		if f, err := os.OpenFile(crashLog, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
			fmt.Fprintln(f, step)
			f.Close()
		}
	}
	if step == crashAt {
		fmt.Fprintf(os.Stderr, "crashpoint %s: killing myself\n", step)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // never return into the next step
	}
}
