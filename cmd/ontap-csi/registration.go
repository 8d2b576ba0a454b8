package main

import (
	"fmt"
	"net"
	"os"

	"github.com/ontap-csi/ontap-csi/registration"
)

// newRegistration builds the kubelet registration of the node role. serve
// is the CSI server's Serve; the manager calls it for each socket it binds.
// kube, the pod's API access (nil outside a pod), is optional for
// registration: with it, it waits for the API server before registering
// (kubelet's CSINode update needs it, K5) and watches CSINode for the
// driver.
func newRegistration(o *options, kube *kubeAccess, serve func(net.Listener) error) (*registration.Manager, error) {
	var api *registration.KubeAPI
	if kube != nil {
		var err error
		if api, err = registration.NewKubeAPI(kube.cfg, kube.hc); err != nil {
			return nil, fmt.Errorf("registration's Kubernetes API access: %w", err)
		}
	}
	return registration.New(registration.Config{
		DriverName:           o.driverName,
		KubeletDir:           o.kubeletDir,
		CSIEndpointPath:      o.endpointPath,
		RegistrationDir:      registration.ResolveRegistrationDir(o.kubeletDir, o.hostRoot, o.registrationDir),
		HandoverGrace:        o.handoverGrace,
		DeregisterOnShutdown: o.deregisterOnShutdown == "always",
		PodName:              os.Getenv("POD_NAME"),
		PodUID:               os.Getenv("POD_UID"),
		NodeName:             o.csiNodeName,
		Serve:                serve,
		Kube:                 api,
	})
}
