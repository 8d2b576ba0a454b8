package main

import (
	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap"
	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/controller"
)

// loadBackends loads every --backend-config. A bad file stops start-up
// with a message naming the file and the key; no backend is contacted here,
// so an unreachable ONTAP does not keep the CSI socket from serving.
func loadBackends(o *options) ([]backends.Backend, error) {
	bs := make([]backends.Backend, 0, len(o.backendConfigs))
	for _, path := range o.backendConfigs {
		cfg, err := config.Load(path)
		if err != nil {
			return nil, err
		}
		b, err := ontap.NewBackend(cfg, ontap.Options{})
		if err != nil {
			return nil, err
		}
		bs = append(bs, b)
	}
	return bs, nil
}

func backendNames(bs []backends.Backend) []string {
	names := make([]string, 0, len(bs))
	for _, b := range bs {
		names = append(names, b.Name())
	}
	return names
}

// newController builds the controller service.
func newController(cfg controller.Config) (*controller.Service, error) {
	if len(cfg.Backends) == 0 && cfg.BackendSource == nil {
		logrus.Warn("no --backend-config given: the controller serves, but cannot create volumes until a backend is configured")
	}
	return controller.New(cfg)
}
