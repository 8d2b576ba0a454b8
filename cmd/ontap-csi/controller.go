package main

import (
	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap"
	"github.com/ontap-csi/ontap-csi/controller"
)

// newController loads every --backend-config and builds the controller
// service. A bad file stops start-up with a message naming the file and the
// key; no backend is contacted here, so an unreachable ONTAP does not keep
// the CSI socket from serving.
func newController(o *options, nodes controller.NodeRegistry) (*controller.Service, error) {
	bs := make([]backends.Backend, 0, len(o.backendConfigs))
	for _, path := range o.backendConfigs {
		cfg, err := ontap.LoadBackendConfig(path)
		if err != nil {
			return nil, err
		}
		b, err := ontap.NewBackend(cfg, ontap.Options{})
		if err != nil {
			return nil, err
		}
		bs = append(bs, b)
	}
	if len(bs) == 0 {
		logrus.Warn("no --backend-config given: the controller serves, but cannot create volumes until a backend is configured")
	}
	return controller.New(controller.Config{Backends: bs, Nodes: nodes})
}
