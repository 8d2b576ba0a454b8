// Command csi-resizer stands in for the csi-resizer sidecar in the cluster
// e2e's controller Deployment (docs/e2e.md), because the module proxy does
// not serve kubernetes-csi/external-resizer (docs/design/local-cluster.md §9). It does
// the controller half of a PVC expansion as csi-resizer v2 does with
// RecoverVolumeExpansionFailure (GA, locked on, in Kubernetes 1.34), which
// is the half kubelet's node expansion waits for:
//
//  1. a bound claim of this driver asks for more than its PV holds: record
//     the size in status.allocatedResources, mark the claim
//     ControllerResizeInProgress and Resizing;
//  2. ControllerExpandVolume with that size (and the PV's
//     controller-expand secret, if any);
//  3. the PV's capacity becomes the answer's;
//  4. if the driver asks for node expansion: NodeResizePending and the
//     FileSystemResizePending condition, after which kubelet calls
//     NodeExpandVolume on the node that has the volume mounted and
//     finishes the claim; otherwise the claim's capacity is set here.
//
// Left out: the modify controller (VolumeAttributesClasses), refusing to
// resize volumes in use for drivers without online expansion (ontap-csi
// expands online), and marking final errors infeasible (errors are
// retried with backoff and reported as events).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"k8s.io/klog/v2"

	"github.com/ontap-csi/ontap-csi/test/cluster/sidecars/standin"
)

func main() {
	var f standin.Flags
	fs := flag.NewFlagSet("csi-resizer", flag.ExitOnError)
	f.Register(fs, "workers")
	_ = fs.Parse(os.Args[1:])
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	if err := run(ctx, f); err != nil {
		klog.Fatal(err)
	}
}

func run(ctx context.Context, f standin.Flags) error {
	conn, driver, err := standin.Connect(ctx, f.CSIAddress)
	if err != nil {
		return err
	}
	ctrl := csi.NewControllerClient(conn)
	caps, err := ctrl.ControllerGetCapabilities(ctx, &csi.ControllerGetCapabilitiesRequest{})
	if err != nil {
		return fmt.Errorf("ControllerGetCapabilities: %w", err)
	}
	expand := false
	for _, c := range caps.GetCapabilities() {
		expand = expand || c.GetRpc().GetType() == csi.ControllerServiceCapability_RPC_EXPAND_VOLUME
	}
	if !expand {
		return fmt.Errorf("driver %s does not advertise EXPAND_VOLUME", driver)
	}
	client, err := f.Client()
	if err != nil {
		return err
	}
	r := newResizer(client, ctrl, driver, f.Timeout)
	return f.Run(ctx, client, standin.LockName("external-resizer", driver), func(ctx context.Context) {
		r.run(ctx, f.Workers)
	})
}
