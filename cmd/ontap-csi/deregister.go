package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ontap-csi/ontap-csi/registration"
)

func init() { subcommands["deregister"] = runDeregister }

// runDeregister is the uninstall path: it marks the node lease uninstalling,
// so the holder removes its registration socket (kubelet then deregisters
// the driver and removes its CSINode entry) and nothing re-registers until a
// new node plugin starts. Run it on each node before deleting the DaemonSet.
func runDeregister(args []string) int {
	fs := flag.NewFlagSet("deregister", flag.ContinueOnError)
	var dirs nodeDirFlags
	dirs.register(fs)
	timeout := fs.Duration("timeout", 30*time.Second, "how long to wait for the holder before removing the registration sockets directly")
	asJSON := fs.Bool("json", false, "print JSON")
	if code, done := parseSubcommand(fs, args); done {
		return code
	}
	pluginDir, regDir, err := dirs.resolve()
	if err != nil {
		fmt.Fprintf(os.Stderr, "ontap-csi deregister: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	res, err := registration.Deregister(ctx, pluginDir, regDir, dirs.driverName)
	if err != nil {
		fmt.Fprintf(os.Stderr, "ontap-csi deregister: %v\n", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return 1
		}
		return 0
	}
	fmt.Printf("marked the node lease (generation %d) uninstalling\n", res.Generation)
	switch {
	case res.ByHolder:
		fmt.Printf("the holder (pod %s) removed its registration socket: kubelet deregisters %s\n", orDash(res.HolderPod), dirs.driverName)
	case res.HolderAlive:
		fmt.Printf("the holder (pod %s) did not remove a registration socket (none on disk, or not within --timeout); removed the sockets directly\n", orDash(res.HolderPod))
	default:
		fmt.Println("no live holder; removed the registration sockets directly")
	}
	for _, p := range res.Unlinked {
		fmt.Printf("removed %s\n", p)
	}
	for _, p := range res.Retired {
		fmt.Printf("retired %s\n", p)
	}
	if !res.ByHolder && len(res.Unlinked) == 0 {
		fmt.Println("no registration socket was on disk: nothing for kubelet to deregister")
	}
	return 0
}
