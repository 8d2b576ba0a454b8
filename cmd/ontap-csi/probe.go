package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/ontap-csi/ontap-csi/server"
)

func init() { subcommands["probe"] = runProbe }

// runProbe is the node DaemonSet's readiness (and liveness) probe: it asks
// this pod's own ontap-csi process, through the pod's health socket, for
// /readyz or /healthz. An httpGet probe on the host network could be
// answered by the other pod's process during a surge rollout.
func runProbe(args []string) int {
	return probeMain(args, os.Getenv("POD_UID"), os.Stderr)
}

func probeMain(args []string, envUID string, stderr io.Writer) int {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	uid := fs.String("pod-uid", envUID, "UID of the pod whose process to ask (default $POD_UID)")
	timeout := fs.Duration("timeout", 2*time.Second, "how long to wait for the answer")
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "ontap-csi probe: "+format+"\n", a...)
		return 1
	}
	if err := fs.Parse(args); err != nil {
		return probeUsage(stderr, err.Error())
	}
	if fs.NArg() != 1 || (fs.Arg(0) != "readyz" && fs.Arg(0) != "healthz") {
		return probeUsage(stderr, "want one of readyz, healthz")
	}
	if *uid == "" {
		return probeUsage(stderr, "no pod UID: set POD_UID (downward API metadata.uid) or --pod-uid")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := server.ProbePodHealth(ctx, *uid, "/"+fs.Arg(0)); err != nil {
		return fail("%v", err)
	}
	return 0
}

const probeUsageLine = "usage: ontap-csi probe [--pod-uid UID] [--timeout D] readyz|healthz"

// probeUsage reports a bad command line in one line, exit code 2.
func probeUsage(w io.Writer, msg string) int {
	fmt.Fprintf(w, "ontap-csi probe: %s (%s)\n", msg, probeUsageLine)
	return 2
}
