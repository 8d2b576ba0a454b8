// Command csi-provisioner stands in for the csi-provisioner sidecar in the
// cluster e2e's controller Deployment (docs/e2e.md). It exists because the
// module proxy does not serve kubernetes-csi/external-provisioner
// (docs/design/local-cluster.md §9); it does serve
// sig-storage-lib-external-provisioner, the controller csi-provisioner is
// built on, which watches claims, classes and volumes, decides when to
// provision and delete, writes the PersistentVolume and binds it, retries
// and elects a leader exactly as there. What csi-provisioner adds on top is
// here, for what ontap-csi is used with:
//
//   - CreateVolume over the CSI socket with the StorageClass parameters,
//     minus the csi.storage.k8s.io/ keys; fstype from
//     csi.storage.k8s.io/fstype; one capability per access mode, block or
//     mount by the claim's volumeMode; the class's mountOptions;
//   - the secrets parameters (provisioner, controller-publish, node-stage,
//     node-publish, controller-expand, node-expand; templates ${pv.name},
//     ${pvc.name}, ${pvc.namespace}), read for CreateVolume and DeleteVolume
//     and referenced from the PV;
//   - --extra-create-metadata: csi.storage.k8s.io/pvc/name, pvc/namespace
//     and pv/name added to the parameters;
//   - topology: requisite and preferred segments from CSINode topology keys
//     and Node labels (the selected node first under WaitForFirstConsumer),
//     or the class's allowedTopologies; the answer becomes the PV's node
//     affinity;
//   - VolumeSnapshot and PersistentVolumeClaim data sources;
//   - delete with the reclaim policy (the library), never while a
//     VolumeAttachment still names the volume.
//
// Left out, as ontap-csi's deploy/ does not turn them on: capacity tracking,
// volume group snapshots, VolumeAttributesClasses, cross-namespace data
// sources, and the source-protection finalizers on snapshots and claims.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v11/controller"

	"github.com/ontap-csi/ontap-csi/test/cluster/sidecars/standin"
)

func main() {
	var f standin.Flags
	fs := flag.NewFlagSet("csi-provisioner", flag.ExitOnError)
	f.Register(fs, "worker-threads")
	extra := fs.Bool("extra-create-metadata", false, "pass the claim's name and namespace and the PV name as parameters")
	_ = fs.Parse(os.Args[1:])
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	if err := run(ctx, f, *extra); err != nil {
		klog.Fatal(err)
	}
}

func run(ctx context.Context, f standin.Flags, extraMetadata bool) error {
	conn, driver, err := standin.Connect(ctx, f.CSIAddress)
	if err != nil {
		return err
	}
	client, err := f.Client()
	if err != nil {
		return err
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return err
	}
	snaps, err := snapclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	p := &provisioner{
		driver: driver, client: client, snaps: snaps, timeout: f.Timeout, extraMetadata: extraMetadata,
		ctrl: csi.NewControllerClient(conn),
		// csi-provisioner's identity: start time, a random number, the driver.
		identity: strconv.FormatInt(time.Now().UnixMilli(), 10) + "-" + strconv.Itoa(os.Getpid()%10000) + "-" + driver,
	}
	if err := p.probeCapabilities(ctx, csi.NewIdentityClient(conn)); err != nil {
		return err
	}
	pc := controller.NewProvisionController(ctx, client, driver, p,
		controller.Threadiness(f.Workers),
		controller.AddFinalizer(true),
		// Leader election is the stand-in's (standin.Run), on the Lease
		// csi-provisioner uses.
		controller.LeaderElection(false),
		controller.FailedProvisionThreshold(0),
		controller.FailedDeleteThreshold(0),
	)
	return f.Run(ctx, client, standin.LockName("", driver), pc.Run)
}

// probeCapabilities reads what the driver supports, as csi-provisioner does
// at start: topology, cloning, snapshots, single-node multi-writer.
func (p *provisioner) probeCapabilities(ctx context.Context, id csi.IdentityClient) error {
	plugin, err := id.GetPluginCapabilities(ctx, &csi.GetPluginCapabilitiesRequest{})
	if err != nil {
		return fmt.Errorf("GetPluginCapabilities: %w", err)
	}
	for _, c := range plugin.GetCapabilities() {
		if c.GetService().GetType() == csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS {
			p.topology = true
		}
	}
	ctrl, err := p.ctrl.ControllerGetCapabilities(ctx, &csi.ControllerGetCapabilitiesRequest{})
	if err != nil {
		return fmt.Errorf("ControllerGetCapabilities: %w", err)
	}
	p.caps = map[csi.ControllerServiceCapability_RPC_Type]bool{}
	for _, c := range ctrl.GetCapabilities() {
		p.caps[c.GetRpc().GetType()] = true
	}
	if !p.caps[csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME] {
		return fmt.Errorf("driver %s does not advertise CREATE_DELETE_VOLUME", p.driver)
	}
	return nil
}
