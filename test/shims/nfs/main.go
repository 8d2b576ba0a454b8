// Command mount is the NFS client of the data-path tests, for machines
// whose kernel has no NFS client.
//
// Installed as "mount" first in PATH (or as mount.nfs / mount.nfs4), it
// turns an NFS mount into what a real client would end up with: it asks the
// ONTAP simulator's data plane whether the export policies admit this client
// (GET /sim/nfs/export?server=&client=&path=), and bind-mounts the volume's
// backing directory on the mount point — read-only when the export only
// grants read access or ro was asked. Its options are checked as mount.nfs
// and the kernel check them (an unknown one fails the mount: "an incorrect
// mount option was specified", exit 32) and the generic ones (nosuid,
// nodev, noexec, noatime, ...) apply (options.go). What it cannot show is
// the file system type: mountinfo has the backing directory's, not nfs or
// nfs4 (this kernel has no NFS), so code that tells NFS mounts by their
// type runs on a real kernel only (test/vm). Every other mount is handed
// to the real mount(8) unchanged; umount needs no shim, a bind mount
// unmounts like any other.
//
// Environment:
//
//	ONTAP_SIM_URL       simulator base URL (required for NFS mounts)
//	ONTAP_SIM_CA        PEM file to trust for an https simulator URL
//	NFS_SHIM_CLIENT_IP  the IP this "node" mounts from (required for NFS)
//	NFS_SHIM_REAL_MOUNT the real mount(8); default: the next "mount" in PATH
//
// Exit codes follow mount(8): 1 usage, 32 mount failure.
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

const (
	exitUsage   = 1
	exitFailure = 32
)

func main() {
	os.Exit(run(filepath.Base(os.Args[0]), os.Args[1:]))
}

func run(prog string, args []string) int {
	req, err := parseArgs(prog, args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", prog, err)
		return exitUsage
	}
	if !req.nfs {
		return execRealMount(prog, args)
	}
	if err := mountNFS(req); err != nil {
		fmt.Fprintf(os.Stderr, "mount.nfs: %v\n", err)
		var ue usageError
		if errors.As(err, &ue) {
			return exitUsage
		}
		return exitFailure
	}
	return 0
}

// execRealMount replaces this process with the real mount(8).
func execRealMount(prog string, args []string) int {
	real, err := realMount()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", prog, err)
		return exitUsage
	}
	err = syscall.Exec(real, append([]string{"mount"}, args...), os.Environ())
	fmt.Fprintf(os.Stderr, "%s: exec %s: %v\n", prog, real, err)
	return exitUsage
}

// realMount finds mount(8) past this shim.
func realMount() (string, error) {
	if p := os.Getenv("NFS_SHIM_REAL_MOUNT"); p != "" {
		return p, nil
	}
	self, _ := os.Executable()
	selfDir := filepath.Dir(self)
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if dir == "" || filepath.Clean(dir) == filepath.Clean(selfDir) {
			continue
		}
		p := filepath.Join(dir, "mount")
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	for _, p := range []string{"/usr/bin/mount", "/bin/mount"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("the real mount(8) is not in PATH")
}
