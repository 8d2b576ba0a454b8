package main

import (
	"net"
	"os"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/rest"

	"github.com/ontap-csi/ontap-csi/registration"
)

// newRegistration builds the kubelet registration of the node role. serve
// is the CSI server's Serve; the manager calls it for each socket it binds.
func newRegistration(o *options, serve func(net.Listener) error) (*registration.Manager, error) {
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
		Kube:                 inClusterAPI(),
	})
}

// inClusterAPI returns access to the Kubernetes API when running in a pod,
// or nil. Registration works without it; with it, it waits for the API
// server before registering (kubelet's CSINode update needs it, K5) and
// watches CSINode for the driver.
func inClusterAPI() *registration.KubeAPI {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		if err != rest.ErrNotInCluster {
			logrus.WithError(err).Warn("in-cluster Kubernetes config unusable; registering without API checks")
		}
		return nil
	}
	api, err := registration.NewKubeAPI(cfg)
	if err != nil {
		logrus.WithError(err).Warn("Kubernetes client unusable; registering without API checks")
		return nil
	}
	return api
}
